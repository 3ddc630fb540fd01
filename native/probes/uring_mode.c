/* io_uring modes.
 *
 * uring-batch: t(n), the time of one io_uring_enter submitting n SEND or n
 *   RECV SQEs on n TCP loopback connections. RECV connections have their
 *   message queued beforehand so every SQE can complete inline. Right after
 *   the submit the CQ is inspected: an SQE whose CQE is not there yet did not
 *   complete inline (it was armed for poll or punted to io-wq), and then the
 *   interval is not t. Such SQEs are counted; above --max-not-inline the
 *   probe fails.
 * nop: n NOP SQEs per io_uring_enter, io_uring's own per-SQE overhead;
 *   n = 0 times a bare io_uring_enter (the io_uring flavour of s).
 *
 * Ring presets (--presets): default, coop_taskrun, single_issuer_defer_taskrun,
 * register_ring_fd. sqpoll is not applicable: the kernel thread submits, so
 * there is no io_uring_enter to time; it is reported, not measured.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/ring_setup.h"
#include "../common/sockpair.h"
#include "../common/timing.h"
#include "config.h"
#include "probe.h"

enum { PRESET_DEFAULT, PRESET_COOP, PRESET_DEFER, PRESET_REGFD, PRESET_SQPOLL, PRESET_COUNT };
static const char *const preset_names[PRESET_COUNT] = {
	"default", "coop_taskrun", "single_issuer_defer_taskrun", "register_ring_fd", "sqpoll",
};
enum { OP_SEND, OP_RECV, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "send", "recv" };

struct ring_slot {
	struct io_uring ring;
	int ok;
	int preset;
	char reason[160];
};

struct ub_ctx {
	struct ring_slot *slot;
	struct conn *conns;
	int op;
	int starve;
	char *buf;          /* n * bytes */
};

/* Set up one preset's ring, with the echo server's flags for the same
 * preset (common/ring_setup.h). On refusal, records the reason instead. */
static void setup_ring(struct ring_slot *s, int preset, unsigned entries)
{
	struct ring_setup rs = RING_SETUP_DEFAULT(entries);
	const char *conflict;
	char why[sizeof(s->reason) - 16];   /* leaves room for the "unavailable: " prefix */
	unsigned features;

	s->preset = preset;
	s->ok = 0;
	switch (preset) {
	case PRESET_SQPOLL:
		snprintf(s->reason, sizeof(s->reason),
			 "not applicable: with SQPOLL a kernel thread submits, so there is no io_uring_enter to time");
		return;
	case PRESET_COOP:
		rs.coop_taskrun = 1;
		break;
	case PRESET_DEFER:
		rs.single_issuer = rs.defer_taskrun = 1;
		break;
	case PRESET_REGFD:
		rs.register_ring_fd = 1;
		break;
	default:
		break;
	}
	conflict = ring_setup_conflict(&rs);
	if (conflict) {
		snprintf(s->reason, sizeof(s->reason), "%s", conflict);
		return;
	}
	if (ring_setup_init(&rs, &s->ring, &features, why, sizeof(why)) < 0) {
		snprintf(s->reason, sizeof(s->reason), "unavailable: %s", why);
		return;
	}
	if (!(features & IORING_FEAT_FAST_POLL) && preset == PRESET_DEFAULT) {
		/* Not fatal for the probe, but worth recording. */
		fprintf(stderr, PROG ": note: kernel lacks IORING_FEAT_FAST_POLL\n");
	}
	s->ok = 1;
}

static struct io_uring_sqe *get_sqe(struct io_uring *ring)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);

	if (!sqe) {
		fprintf(stderr, PROG ": submission queue full (ring too small for the batch)\n");
		exit(1);
	}
	return sqe;
}

/* Reap exactly `want` CQEs, checking each result; returns when all arrived. */
static void reap(struct io_uring *ring, long long want, long long expect_res, const char *what)
{
	while (want > 0) {
		struct io_uring_cqe *cqe;
		struct __kernel_timespec ts = { .tv_sec = 5, .tv_nsec = 0 };
		int ret = io_uring_wait_cqe_timeout(ring, &cqe, &ts);

		if (ret < 0) {
			fprintf(stderr, PROG ": waiting for %s completions: %s (%lld outstanding)\n",
				what, strerror(-ret), want);
			exit(1);
		}
		if (expect_res >= 0 && cqe->res != expect_res) {
			fprintf(stderr, PROG ": %s completed with %d (wanted %lld)%s%s\n", what, cqe->res,
				expect_res, cqe->res < 0 ? ": " : "", cqe->res < 0 ? strerror(-cqe->res) : "");
			exit(1);
		}
		io_uring_cqe_seen(ring, cqe);
		want--;
	}
}

static uint64_t timed_submit(struct io_uring *ring, long long n)
{
	uint64_t t0 = now_ns();
	int ret = io_uring_submit(ring);
	uint64_t ns = now_ns() - t0;

	if (ret != n) {
		fprintf(stderr, PROG ": io_uring_submit returned %d for %lld SQEs%s%s\n", ret, n,
			ret < 0 ? ": " : "", ret < 0 ? strerror(-ret) : "");
		exit(1);
	}
	return ns;
}

static void uring_batch(struct cell *c, struct batch_result *r)
{
	struct ub_ctx *x = c->ctx;
	struct io_uring *ring = &x->slot->ring;
	size_t m = (size_t)c->bytes;
	long long n = c->n;

	/* Echo-server conditions, as in sendrecv's pingpong regime. */
	echo_rounds(PROG, x->conns, (size_t)n, 1, x->buf, m);
	if (x->op == OP_RECV && !x->starve) {
		for (long long i = 0; i < n; i++)
			write_all(PROG, x->conns[i].b, x->buf, m);
		for (long long i = 0; i < n; i++)
			wait_queued(PROG, x->conns[i].a, m);
	}
	for (long long i = 0; i < n; i++) {
		struct io_uring_sqe *sqe = get_sqe(ring);

		if (x->op == OP_SEND)
			io_uring_prep_send(sqe, x->conns[i].a, x->buf + (size_t)i * m, m, MSG_NOSIGNAL);
		else
			io_uring_prep_recv(sqe, x->conns[i].a, x->buf + (size_t)i * m, m, 0);
		io_uring_sqe_set_data64(sqe, (__u64)i);
	}
	r->calls = 1;
	r->ns = timed_submit(ring, n);
	r->not_inline = n - (long long)io_uring_cq_ready(ring);
	if (x->op == OP_RECV && x->starve) {
		/* Nothing was queued, so the RECVs were armed for poll; feed them now
		 * so they complete and the ring is clean for the next batch. */
		for (long long i = 0; i < n; i++)
			write_all(PROG, x->conns[i].b, x->buf, m);
	}
	reap(ring, n, (long long)m, op_names[x->op]);
	if (x->op == OP_SEND)
		for (long long i = 0; i < n; i++)
			drain_exact(PROG, x->conns[i].b, m);
	if (x->op == OP_RECV)
		r->emptied = n;
}

static void nop_batch(struct cell *c, struct batch_result *r)
{
	struct ring_slot *s = ((struct ub_ctx *)c->ctx)->slot;
	struct io_uring *ring = &s->ring;

	r->calls = 1;
	if (c->n == 0) {
		/* A bare enter: liburing skips the syscall when nothing is queued. */
		unsigned flags = s->preset == PRESET_REGFD ? IORING_ENTER_REGISTERED_RING : 0;
		int fd = s->preset == PRESET_REGFD ? ring->enter_ring_fd : ring->ring_fd;
		uint64_t t0 = now_ns();
		long ret = syscall(__NR_io_uring_enter, fd, 0, 0, flags, NULL, 0);

		r->ns = now_ns() - t0;
		if (ret < 0) {
			fprintf(stderr, PROG ": io_uring_enter: %s\n", strerror(errno));
			exit(1);
		}
		return;
	}
	for (long long i = 0; i < c->n; i++)
		io_uring_prep_nop(get_sqe(ring));
	r->ns = timed_submit(ring, c->n);
	r->not_inline = c->n - (long long)io_uring_cq_ready(ring);
	reap(ring, c->n, 0, "nop");
}

static unsigned ring_entries(const struct int_list *n)
{
	unsigned e = 8;
	long long max = 0;

	for (size_t i = 0; i < n->n; i++)
		if (n->v[i] > max)
			max = n->v[i];
	while ((long long)e < max)
		e <<= 1;
	return e;
}

static int run_uring(const struct probe_opts *o, struct raw_out *out, int nop)
{
	const char *mode = nop ? "nop" : "uring-batch";
	unsigned pset = parse_name_set(PROG, "--presets", o->presets, preset_names, PRESET_COUNT);
	unsigned oset = nop ? 1u : parse_name_set(PROG, "--ops", o->ops, op_names, OP_COUNT);
	struct ring_slot slots[PRESET_COUNT];
	size_t cap = (size_t)PRESET_COUNT * OP_COUNT * o->n.n * (nop ? 1 : o->bytes.n);
	struct cell *cells = calloc(cap, sizeof(*cells));
	struct ub_ctx *ctx = calloc(cap, sizeof(*ctx));
	unsigned entries = ring_entries(&o->n);
	long long maxn = entries, maxbytes = 1;
	struct conn *conns = NULL;
	size_t ncells = 0;
	char *buf;
	int rc, usable = 0;
	double timer_ns;

	if (!cells || !ctx) {
		perror("calloc");
		return 1;
	}
	for (size_t i = 0; !nop && i < o->bytes.n; i++)
		if (o->bytes.v[i] > maxbytes)
			maxbytes = o->bytes.v[i];
	buf = calloc((size_t)maxn, (size_t)maxbytes);
	if (!buf) {
		perror("calloc");
		return 1;
	}
	memset(buf, 'u', (size_t)maxn * (size_t)maxbytes);
	if (!nop) {
		conns = make_conns(PROG, TRANSPORT_TCP, (size_t)maxn);
		/* Past a new connection's quick-ACK credit, as sendrecv does. */
		echo_rounds(PROG, conns, (size_t)maxn, 32, buf, 1);
	}

	for (int p = 0; p < PRESET_COUNT; p++) {
		if (!(pset & (1u << p)))
			continue;
		setup_ring(&slots[p], p, entries);
		if (!slots[p].ok) {
			/* Recorded in the output; the run goes on with the others. */
			if (raw_printf(out, "# unavailable: preset=%s reason=%s\n", preset_names[p], slots[p].reason))
				return 1;
			continue;
		}
		usable++;
		for (int op = 0; op < OP_COUNT; op++) {
			if (!(oset & (1u << op)))
				continue;
			for (size_t i = 0; i < o->n.n; i++) {
				for (size_t b = 0; b < (nop ? 1 : o->bytes.n); b++) {
					if (!nop && o->n.v[i] == 0) {
						fprintf(stderr, PROG ": --n 0 is only meaningful for nop\n");
						return 2;
					}
					ctx[ncells] = (struct ub_ctx){ &slots[p], conns, op, o->starve, buf };
					cells[ncells] = (struct cell){
						.variant = nop ? "nop" : op_names[op], .transport = nop ? "-" : "tcp",
						.pattern = preset_names[p], .ack = nop ? "-" : "pingpong", .bytes = nop ? 0 : o->bytes.v[b],
						.n = o->n.v[i], .connections = nop ? 0 : o->n.v[i],
						.ctx = &ctx[ncells],
					};
					ncells++;
				}
			}
		}
	}
	if (!usable) {
		fprintf(stderr, PROG ": no usable ring preset among --presets %s:", o->presets);
		for (int p = 0; p < PRESET_COUNT; p++)
			if (pset & (1u << p))
				fprintf(stderr, " %s: %s;", preset_names[p], slots[p].reason);
		fprintf(stderr, "\n");
		return 1;
	}
	timer_ns = timer_overhead_ns(10001);
	if (raw_printf(out, "# ring_entries=%u\n# max_not_inline=%g\n", entries, o->max_not_inline) ||
	    write_header(out, mode, o, timer_ns))
		return 1;
	rc = run_cells(out, mode, o, cells, ncells, nop ? nop_batch : uring_batch);
	if (rc == 0) {
		long long sqes = 0, missed = 0;

		for (size_t i = 0; i < ncells; i++) {
			sqes += cells[i].sqes;
			missed += cells[i].not_inline;
		}
		if (sqes > 0 && (double)missed > o->max_not_inline * (double)sqes) {
			fprintf(stderr, PROG ": %lld of %lld SQEs (%.1f%%) did not complete inline (limit %.1f%%); these intervals are not t(n)\n",
				missed, sqes, 100.0 * (double)missed / (double)sqes, 100.0 * o->max_not_inline);
			rc = 1;
		}
	}
	for (int p = 0; p < PRESET_COUNT; p++)
		if ((pset & (1u << p)) && slots[p].ok)
			io_uring_queue_exit(&slots[p].ring);
	if (conns)
		close_conns(conns, (size_t)maxn);
	free(buf);
	free(cells);
	free(ctx);
	return rc;
}

static int mode_uring_batch(const struct probe_opts *o, struct raw_out *out)
{
	return run_uring(o, out, 0);
}

static int mode_nop(const struct probe_opts *o, struct raw_out *out)
{
	return run_uring(o, out, 1);
}

#define RING_PRESET_USAGE \
	"  --presets LIST       ring presets: default,coop_taskrun,\n" \
	"                       single_issuer_defer_taskrun,register_ring_fd,sqpoll;\n" \
	"                       refused or not applicable presets are reported in\n" \
	"                       '# unavailable:' lines\n" \
	"  --n LIST             SQEs per io_uring_enter\n"

static const struct probe_mode uring_batch_mode = {
	.name = "uring-batch",
	.summary = "t(n): one io_uring_enter with n SEND or n RECV SQEs on n\n"
		   "connections; checks every SQE completed inline",
	.usage = RING_PRESET_USAGE
		"  --ops LIST           subset of send,recv\n"
		"  --bytes LIST         message sizes\n"
		"  --max-not-inline F   fail if more than this fraction of SQEs did not\n"
		"                       complete inline\n"
		"  --starve             queue no data before RECV (forces non-inline\n"
		"                       completion; for testing the check)\n",
	.flags = F_COMMON | F_PRESETS | F_N | F_OPS | F_BYTES | F_MAX_NOT_INLINE | F_STARVE,
	.defaults = "--batches 100 --warmup-batches 10 --ops send,recv --n 1,2,4,8,16,32,64,128,256 "
		    "--bytes 16 --presets default --max-not-inline 0.01",
	.min_n = 1,
	.run = mode_uring_batch,
};
PROBE_MODE(uring_batch_mode);

static const struct probe_mode nop_mode = {
	.name = "nop",
	.summary = "io_uring's own cost: n NOP SQEs per io_uring_enter\n"
		   "(n = 0: a bare io_uring_enter)",
	.usage = RING_PRESET_USAGE,
	.flags = F_COMMON | F_PRESETS | F_N,
	.defaults = "--batches 100 --warmup-batches 10 --n 0,1,2,4,8,16,32,64,128,256 --presets default",
	.min_n = 0,
	.run = mode_nop,
};
PROBE_MODE(nop_mode);
