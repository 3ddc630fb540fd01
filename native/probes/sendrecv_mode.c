/* sendrecv mode: s + w for send(2) and recv(2) over TCP loopback (TCP_NODELAY)
 * and AF_UNIX stream sockets.
 *
 * Patterns:
 *   single      K calls on one connection. For recv, K messages are queued
 *               first, so only the last recv of a batch empties the queue.
 *   roundrobin  one call on each of N connections. For recv, each connection
 *               holds one message, so every recv empties its queue.
 * ACK regimes (--ack-modes, TCP only):
 *   pingpong    connections are warmed with echo rounds at setup and get one
 *               more untimed echo round before each batch, as in an echo
 *               server: both ends are in delayed-ACK (ping-pong) mode and
 *               ACKs ride on responses.
 *   quickack    TCP_QUICKACK on both ends before each batch: every segment is
 *               ACKed at once and a recv that empties its queue sends an ACK
 *               (tcp_cleanup_rbuf). On loopback the sender also pays for the
 *               receiver's processing, so a send then includes an ACK's cost.
 * quickack - pingpong separates the ACK cost from w; `emptied` counts the recv
 * calls that emptied a queue. Feeding and draining happen outside the timing.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../common/sockpair.h"
#include "../common/timing.h"
#include "probe.h"

/* Echo rounds per connection at setup: past the 16 segments of quick-ACK
 * credit a new TCP connection starts with. */
#define WARM_ROUNDS 32

enum { OP_SEND, OP_RECV, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "send", "recv" };
enum { PAT_SINGLE, PAT_ROUNDROBIN, PAT_COUNT };
static const char *const pattern_names[PAT_COUNT] = { "single", "roundrobin" };
enum { ACK_PINGPONG, ACK_QUICKACK, ACK_COUNT };
static const char *const ack_names[ACK_COUNT] = { "pingpong", "quickack" };

struct sr_ctx {
	struct conn *conns;
	size_t nconns;
	int op, pattern, ack;          /* ack: -1 for AF_UNIX */
	long long calls_single;
	char *buf;
};

static void fail_io(const char *what, ssize_t got, long long want)
{
	fprintf(stderr, PROG ": %s returned %zd (wanted %lld): %s\n", what, got, want,
		got < 0 ? strerror(errno) : "short transfer");
	exit(1);
}

static void prepare_ack_regime(struct sr_ctx *x, long long used, size_t m)
{
	for (long long i = 0; i < used; i++) {
		if (x->ack == ACK_PINGPONG) {
			echo_rounds(PROG, &x->conns[i], 1, 1, x->buf, m);
		} else if (x->ack == ACK_QUICKACK) {
			set_quickack(PROG, x->conns[i].a);
			set_quickack(PROG, x->conns[i].b);
		}
	}
}

static void run_batch(struct cell *c, struct batch_result *r)
{
	struct sr_ctx *x = c->ctx;
	size_t m = (size_t)c->bytes;
	long long k = x->pattern == PAT_SINGLE ? x->calls_single : (long long)x->nconns;
	uint64_t t0;

	r->calls = k;
	if (x->op == OP_SEND) {
		prepare_ack_regime(x, x->pattern == PAT_SINGLE ? 1 : k, m);
		t0 = now_ns();
		for (long long i = 0; i < k; i++) {
			int fd = x->conns[x->pattern == PAT_SINGLE ? 0 : i].a;
			ssize_t w = send(fd, x->buf, m, MSG_NOSIGNAL);

			if (w != (ssize_t)m)
				fail_io("send", w, (long long)m);
		}
		r->ns = now_ns() - t0;
		if (x->pattern == PAT_SINGLE)
			drain_exact(PROG, x->conns[0].b, (size_t)k * m);
		else
			for (long long i = 0; i < k; i++)
				drain_exact(PROG, x->conns[i].b, m);
		return;
	}
	/* recv: queue the messages first, wait until they have all arrived. */
	prepare_ack_regime(x, x->pattern == PAT_SINGLE ? 1 : k, m);
	if (x->pattern == PAT_SINGLE) {
		for (long long i = 0; i < k; i++)
			write_all(PROG, x->conns[0].b, x->buf, m);
		wait_queued(PROG, x->conns[0].a, (size_t)k * m);
	} else {
		for (long long i = 0; i < k; i++)
			write_all(PROG, x->conns[i].b, x->buf, m);
		for (long long i = 0; i < k; i++)
			wait_queued(PROG, x->conns[i].a, m);
	}
	t0 = now_ns();
	for (long long i = 0; i < k; i++) {
		int fd = x->conns[x->pattern == PAT_SINGLE ? 0 : i].a;
		ssize_t got = recv(fd, x->buf, m, 0);

		if (got != (ssize_t)m)
			fail_io("recv", got, (long long)m);
	}
	r->ns = now_ns() - t0;
	r->emptied = x->pattern == PAT_SINGLE ? 1 : k;
}

static int mode_sendrecv(const struct probe_opts *o, struct raw_out *out)
{
	unsigned tset = parse_name_set(PROG, "--transports", o->transports, transport_names, TRANSPORT_COUNT);
	unsigned pset = parse_name_set(PROG, "--patterns", o->patterns, pattern_names, PAT_COUNT);
	unsigned oset = parse_name_set(PROG, "--ops", o->ops, op_names, OP_COUNT);
	unsigned aset = parse_name_set(PROG, "--ack-modes", o->ack_modes, ack_names, ACK_COUNT);
	size_t ncells = 0, cap = (size_t)TRANSPORT_COUNT * PAT_COUNT * OP_COUNT * ACK_COUNT * o->bytes.n;
	struct cell *cells = calloc(cap, sizeof(*cells));
	struct sr_ctx *ctx = calloc(cap, sizeof(*ctx));
	struct conn *conns[TRANSPORT_COUNT] = { NULL };
	long long maxbytes = 0, calls_single = o->calls_per_batch > 0 ? o->calls_per_batch : 64;
	char *buf;
	double timer_ns;
	int rc;

	if (!cells || !ctx) {
		perror("calloc");
		return 1;
	}
	maxbytes = max_queued_bytes(&o->bytes, calls_single);
	buf = malloc((size_t)maxbytes);
	if (!buf) {
		perror("malloc");
		return 1;
	}
	memset(buf, 'w', (size_t)maxbytes);
	for (int t = 0; t < TRANSPORT_COUNT; t++)
		if (tset & (1u << t))
		{
			conns[t] = make_conns(PROG, (enum transport)t, (size_t)o->connections);
			echo_rounds(PROG, conns[t], (size_t)o->connections, WARM_ROUNDS, buf, 16);
		}

	for (int t = 0; t < TRANSPORT_COUNT; t++) {
		if (!(tset & (1u << t)))
			continue;
		for (int p = 0; p < PAT_COUNT; p++) {
			if (!(pset & (1u << p)))
				continue;
			for (int op = 0; op < OP_COUNT; op++) {
				if (!(oset & (1u << op)))
					continue;
				for (int a = 0; a < ACK_COUNT; a++) {
					/* ACK regimes are a TCP notion; AF_UNIX runs once. */
					int ack = t == TRANSPORT_TCP ? a : -1;

					if (t == TRANSPORT_TCP ? !(aset & (1u << a)) : a > 0)
						continue;
					for (size_t b = 0; b < o->bytes.n; b++) {
						ctx[ncells] = (struct sr_ctx){ conns[t], (size_t)o->connections, op,
									       p, ack, calls_single, buf };
						cells[ncells] = (struct cell){
							.variant = op_names[op], .transport = transport_names[t],
							.pattern = pattern_names[p], .ack = ack >= 0 ? ack_names[ack] : "-",
							.bytes = o->bytes.v[b], .n = 1,
							.connections = p == PAT_SINGLE ? 1 : o->connections,
							.ctx = &ctx[ncells],
						};
						ncells++;
					}
				}
			}
		}
	}
	timer_ns = timer_overhead_ns(10001);
	if (raw_printf(out, "# calls_per_batch_single=%lld\n", calls_single) ||
	    write_header(out, "sendrecv", o, timer_ns))
		return 1;
	rc = run_cells(out, "sendrecv", o, cells, ncells, run_batch);
	for (int t = 0; t < TRANSPORT_COUNT; t++)
		if (conns[t])
			close_conns(conns[t], (size_t)o->connections);
	free(buf);
	free(cells);
	free(ctx);
	return rc;
}

static const struct probe_mode sendrecv_mode = {
	.name = "sendrecv",
	.summary = "s + w: send(2)/recv(2) over TCP loopback and AF_UNIX",
	.usage = "  --transports LIST    subset of tcp,unix\n"
		 "  --ops LIST           subset of send,recv\n"
		 "  --patterns LIST      subset of single,roundrobin: K calls on one\n"
		 "                       connection, or one call on each of N (every\n"
		 "                       roundrobin recv empties its queue)\n"
		 "  --bytes LIST         message sizes\n"
		 "  --ack-modes LIST     TCP ACK regimes: pingpong,quickack: an untimed\n"
		 "                       echo round before each batch (delayed ACKs, as in\n"
		 "                       an echo server), or TCP_QUICKACK on both ends\n"
		 "                       (every segment ACKed at once)\n"
		 "  --connections N      N for roundrobin\n"
		 "  --calls-per-batch K  K for single\n",
	.flags = F_COMMON | F_TRANSPORTS | F_OPS | F_PATTERNS | F_BYTES | F_CONNECTIONS | F_CALLS | F_ACK_MODES,
	.defaults = "--batches 150 --warmup-batches 15 --transports tcp,unix --ops send,recv "
		    "--patterns single,roundrobin --ack-modes pingpong,quickack --bytes 16,128,512,1024 "
		    "--connections 64 --calls-per-batch 64",
	.min_n = 1,
	.run = mode_sendrecv,
};
PROBE_MODE(sendrecv_mode);
