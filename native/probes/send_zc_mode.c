/* send-zc mode: the sender's time per send, plain against zero-copy, by
 * message size, over TCP loopback.
 *
 * Variants (--variants):
 *   send           IORING_OP_SEND: the kernel copies the message into the
 *                  socket's buffers
 *   send_zc        IORING_OP_SEND_ZC: the kernel pins the user pages and
 *                  sends from them; a second CQE (the notification) says
 *                  when they are free again
 *   send_zc_fixed  SEND_ZC from a registered buffer (IORING_RECVSEND_FIXED_BUF):
 *                  no page pinning per send
 * Every zero-copy send asks for IORING_SEND_ZC_REPORT_USAGE, so each
 * notification says whether the kernel copied after all. On loopback and
 * veth it must: a locally delivered skb that points at user pages is
 * copied on receive (skb_orphan_frags_rx). The copies are counted and
 * written as "# zc_usage:" lines after the samples, one per cell.
 *
 * A batch is K sends (--calls-per-batch) on one connection, each its own
 * submit followed by a wait for its CQE; both ends have TCP_QUICKACK set
 * first, so every segment is ACKed at once and the pages of a zero-copy
 * send are released while the batch runs, not 40 ms later by the
 * delayed-ACK timer. On loopback the sender's time then includes the
 * receiver's protocol work and the ACK, equally for every variant.
 * Notifications are counted whenever they arrive; those still outstanding
 * when the batch ends are reaped untimed after the receiver is drained.
 * not_inline counts the sends whose CQE was not ready right after submit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "../common/ring_setup.h"
#include "../common/sockpair.h"
#include "../common/timing.h"
#include "../common/uring_compat.h"
#include "probe.h"

enum { V_SEND, V_SEND_ZC, V_SEND_ZC_FIXED, V_COUNT };
static const char *const variant_names[V_COUNT] = { "send", "send_zc", "send_zc_fixed" };

/* What one cell's measured batches saw of the zero-copy notifications. */
struct zc_ctx {
	struct io_uring *ring;
	struct conn *conn;
	int variant;
	long long calls, warmup_batches;
	char *buf;
	long long notifications, copied;   /* measured batches only */
	long long pending;                 /* notifications not yet reaped */
};

static void prep(struct zc_ctx *x, size_t m)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(x->ring);

	if (!sqe) {
		fprintf(stderr, PROG ": submission queue full\n");
		exit(1);
	}
	if (x->variant == V_SEND)
		io_uring_prep_send(sqe, x->conn->a, x->buf, m, MSG_NOSIGNAL);
	else if (x->variant == V_SEND_ZC)
		io_uring_prep_send_zc(sqe, x->conn->a, x->buf, m, MSG_NOSIGNAL, IORING_SEND_ZC_REPORT_USAGE);
	else
		io_uring_prep_send_zc_fixed(sqe, x->conn->a, x->buf, m, MSG_NOSIGNAL, IORING_SEND_ZC_REPORT_USAGE, 0);
}

/* Reap CQEs until one send's own CQE has arrived (or, with want_send = 0,
 * one notification). Notifications are counted into `x` when `count`. */
static void reap_one(struct zc_ctx *x, size_t m, int want_send, int count)
{
	for (;;) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = { .tv_sec = 5, .tv_nsec = 0 };
		int ret = io_uring_wait_cqe_timeout(x->ring, &cqe, &ts);
		int notif;

		if (ret < 0) {
			fprintf(stderr, PROG ": waiting for a %s %s: %s\n", variant_names[x->variant],
				want_send ? "completion" : "zero-copy notification", strerror(-ret));
			exit(1);
		}
		notif = (cqe->flags & IORING_CQE_F_NOTIF) != 0;
		if (notif) {
			x->pending--;
			if (count) {
				x->notifications++;
				x->copied += (cqe->res & (int)IORING_NOTIF_USAGE_ZC_COPIED) != 0;
			}
		} else if (cqe->res != (int)m) {
			fprintf(stderr, PROG ": %s completed with %d (wanted %zu)%s%s\n", variant_names[x->variant],
				cqe->res, m, cqe->res < 0 ? ": " : "", cqe->res < 0 ? strerror(-cqe->res) : "");
			exit(1);
		} else if (x->variant != V_SEND) {
			/* A zero-copy send's CQE promises its notification (F_MORE). */
			x->pending += (cqe->flags & IORING_CQE_F_MORE) != 0;
		}
		io_uring_cqe_seen(x->ring, cqe);
		if (notif != want_send)
			return;
	}
}

static void run_batch(struct cell *c, struct batch_result *r)
{
	struct zc_ctx *x = c->ctx;
	size_t m = (size_t)c->bytes;
	int measured = c->batch >= x->warmup_batches;
	uint64_t t0;

	set_quickack(PROG, x->conn->a);
	set_quickack(PROG, x->conn->b);
	r->calls = x->calls;
	t0 = now_ns();
	for (long long i = 0; i < x->calls; i++) {
		int ret;

		prep(x, m);
		ret = io_uring_submit(x->ring);
		if (ret != 1) {
			fprintf(stderr, PROG ": io_uring_submit returned %d%s%s\n", ret, ret < 0 ? ": " : "",
				ret < 0 ? strerror(-ret) : "");
			exit(1);
		}
		r->not_inline += io_uring_cq_ready(x->ring) == 0;
		reap_one(x, m, 1, measured);
	}
	r->ns = now_ns() - t0;
	drain_exact(PROG, x->conn->b, (size_t)x->calls * m);
	while (x->pending > 0)
		reap_one(x, m, 0, measured);
}

/* Whether the kernel takes SEND_ZC with usage reports: one untimed 1-byte
 * send. Returns NULL, or why not. */
static const char *zc_refusal(struct io_uring *ring, struct conn *conn, char *buf)
{
	struct io_uring_probe *probe = io_uring_get_probe_ring(ring);
	struct io_uring_cqe *cqe;
	int supported = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);
	int res, more, ret;

	io_uring_free_probe(probe);
	if (!supported)
		return "unavailable: this kernel lacks IORING_OP_SEND_ZC (Linux 6.0)";
	io_uring_prep_send_zc(io_uring_get_sqe(ring), conn->a, buf, 1, MSG_NOSIGNAL, IORING_SEND_ZC_REPORT_USAGE);
	/* liburing returns -errno; errno is not set. */
	ret = io_uring_submit_and_wait(ring, 1);
	if (ret >= 0)
		ret = io_uring_wait_cqe(ring, &cqe);
	if (ret < 0) {
		fprintf(stderr, PROG ": a first zero-copy send could not be submitted: %s\n", strerror(-ret));
		exit(1);
	}
	res = cqe->res;
	more = (cqe->flags & IORING_CQE_F_MORE) != 0;
	io_uring_cqe_seen(ring, cqe);
	if (res == -EINVAL)
		return "unavailable: this kernel refused IORING_SEND_ZC_REPORT_USAGE (EINVAL; Linux 6.2)";
	if (res != 1) {
		fprintf(stderr, PROG ": a first zero-copy send completed with %d%s%s\n", res, res < 0 ? ": " : "",
			res < 0 ? strerror(-res) : "");
		exit(1);
	}
	drain_exact(PROG, conn->b, 1);
	if (more) {
		ret = io_uring_wait_cqe(ring, &cqe);
		if (ret < 0) {
			fprintf(stderr, PROG ": waiting for a first zero-copy notification: %s\n", strerror(-ret));
			exit(1);
		}
		io_uring_cqe_seen(ring, cqe);
	}
	return NULL;
}

static int mode_send_zc(const struct probe_opts *o, struct raw_out *out)
{
	unsigned vset = parse_name_set(PROG, "--variants", o->variants, variant_names, V_COUNT);
	long long calls = o->calls_per_batch > 0 ? o->calls_per_batch : 8, maxbytes;
	struct ring_setup rs = RING_SETUP_DEFAULT(8);
	struct io_uring ring;
	unsigned features;
	char why[160];
	size_t ncells = 0;
	struct cell *cells = calloc((size_t)V_COUNT * o->bytes.n, sizeof(*cells));
	struct zc_ctx *ctx = calloc((size_t)V_COUNT * o->bytes.n, sizeof(*ctx));
	const char *refused = NULL;
	struct conn *conn;
	struct iovec iov;
	char *buf;
	int rc;

	if (!cells || !ctx) {
		perror("calloc");
		return 1;
	}
	/* A batch's messages wait in the receive queue until it is drained. */
	maxbytes = max_queued_bytes(&o->bytes, calls);
	buf = aligned_alloc(4096, ((size_t)maxbytes + 4095) / 4096 * 4096);
	if (!buf) {
		perror("aligned_alloc");
		return 1;
	}
	memset(buf, 'z', (size_t)maxbytes);
	if (ring_setup_init(&rs, &ring, &features, why, sizeof(why)) < 0) {
		fprintf(stderr, PROG ": io_uring setup: %s\n", why);
		return 1;
	}
	conn = make_conns(PROG, TRANSPORT_TCP, 1);
	echo_rounds(PROG, conn, 1, 32, buf, 1);
	if (vset & ~(1u << V_SEND))
		refused = zc_refusal(&ring, conn, buf);
	iov = (struct iovec){ buf, (size_t)maxbytes };
	if (!refused && (vset & (1u << V_SEND_ZC_FIXED))) {
		int ret = io_uring_register_buffers(&ring, &iov, 1);

		if (ret < 0) {
			fprintf(stderr, PROG ": io_uring_register_buffers: %s\n", strerror(-ret));
			return 1;
		}
	}
	for (int v = 0; v < V_COUNT; v++) {
		if (!(vset & (1u << v)))
			continue;
		if (v != V_SEND && refused) {
			/* Recorded in the output; plain send is still measured. */
			if (raw_printf(out, "# unavailable: preset=%s reason=%s\n", variant_names[v], refused))
				return 1;
			continue;
		}
		for (size_t b = 0; b < o->bytes.n; b++) {
			ctx[ncells] = (struct zc_ctx){ .ring = &ring, .conn = conn, .variant = v, .calls = calls,
						       .warmup_batches = o->warmup_batches, .buf = buf };
			cells[ncells] = (struct cell){
				.variant = variant_names[v], .transport = "tcp", .pattern = "default", .ack = "quickack",
				.bytes = o->bytes.v[b], .n = 1, .connections = 1, .ctx = &ctx[ncells],
			};
			ncells++;
		}
	}
	if (raw_printf(out, "# calls_per_batch=%lld\n", calls) ||
	    write_header(out, "send-zc", o, timer_overhead_ns(10001)))
		return 1;
	rc = run_cells(out, "send-zc", o, cells, ncells, run_batch);
	for (size_t i = 0; rc == 0 && i < ncells; i++)
		if (ctx[i].variant != V_SEND &&
		    raw_printf(out, "# zc_usage: variant=%s bytes=%lld notifications=%lld copied=%lld\n",
			       cells[i].variant, cells[i].bytes, ctx[i].notifications, ctx[i].copied))
			rc = 1;
	io_uring_queue_exit(&ring);
	close_conns(conn, 1);
	free(buf);
	free(cells);
	free(ctx);
	return rc;
}

static const struct probe_mode send_zc_mode = {
	.name = "send-zc",
	.summary = "the sender's time per send by message size: io_uring SEND\n"
		   "against SEND_ZC, which reports whether the kernel copied",
	.usage = "  --variants LIST      subset of send,send_zc,send_zc_fixed\n"
		 "  --bytes LIST         message sizes\n"
		 "  --calls-per-batch K  sends per batch on one connection\n"
		 "  After the samples, one '# zc_usage:' line per zero-copy cell counts its\n"
		 "  notifications and those that report the kernel copied the data.\n",
	.flags = F_COMMON | F_VARIANTS | F_BYTES | F_CALLS,
	.defaults = "--batches 60 --warmup-batches 6 --variants send,send_zc,send_zc_fixed "
		    "--bytes 1024,4096,16384,65536 --calls-per-batch 8",
	.min_n = 1,
	.run = mode_send_zc,
};
PROBE_MODE(send_zc_mode);
