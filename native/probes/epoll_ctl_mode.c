/* epoll-ctl mode: what an epoll server pays to change what it waits for on
 * a connection, one epoll_ctl(2) EPOLL_CTL_MOD on a connected TCP loopback
 * socket. echo-epoll does this when a send is short (it adds EPOLLOUT) and
 * again when the queue is written (it drops it); each call here alternates
 * the two interests, so each re-polls the socket as the server's do. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "../common/sockpair.h"
#include "../common/timing.h"
#include "probe.h"

struct ec_ctx {
	int epfd, fd;
	long long calls;
	long long failed;       /* calls that returned an error */
};

static uint64_t mod_batch(struct ec_ctx *x, long long calls)
{
	struct epoll_event in = { .events = EPOLLIN, .data.fd = x->fd };
	struct epoll_event in_out = { .events = EPOLLIN | EPOLLOUT, .data.fd = x->fd };
	uint64_t t0 = now_ns();

	for (long long i = 0; i < calls; i++)
		if (epoll_ctl(x->epfd, EPOLL_CTL_MOD, x->fd, (i & 1) ? &in : &in_out) != 0)
			x->failed++;
	return now_ns() - t0;
}

static uint64_t time_calls(void *ctx, long long calls)
{
	return mod_batch(ctx, calls);
}

static void run_batch(struct cell *c, struct batch_result *r)
{
	struct ec_ctx *x = c->ctx;

	r->calls = x->calls;
	r->ns = mod_batch(x, x->calls);
}

static int mode_epoll_ctl(const struct probe_opts *o, struct raw_out *out)
{
	struct conn *conn = make_conns(PROG, TRANSPORT_TCP, 1);
	struct ec_ctx x = { .fd = conn->a };
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = conn->a };
	struct cell cell;
	double timer_ns = timer_overhead_ns(10001);
	int rc;

	x.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (x.epfd < 0) {
		fprintf(stderr, PROG ": epoll_create1: %s\n", strerror(errno));
		return 1;
	}
	if (epoll_ctl(x.epfd, EPOLL_CTL_ADD, x.fd, &ev) != 0) {
		fprintf(stderr, PROG ": epoll_ctl: %s\n", strerror(errno));
		return 1;
	}
	x.calls = calls_per_batch(o, "mod", timer_ns, time_calls, &x);
	if (x.calls == 0)
		return 1;
	cell = (struct cell){ .variant = "mod", .transport = "tcp", .pattern = "-", .bytes = 0, .n = 1,
			      .connections = 1, .ctx = &x };
	if (raw_printf(out, "# batch_us=%lld\n", o->batch_us) || write_header(out, "epoll-ctl", o, timer_ns))
		return 1;
	rc = run_cells(out, "epoll-ctl", o, &cell, 1, run_batch);
	/* A failed call timed an early return, not the change: the rows would
	 * not be what they say, so the run fails. */
	if (x.failed) {
		fprintf(stderr, PROG ": %lld epoll_ctl(EPOLL_CTL_MOD) calls failed\n", x.failed);
		return 1;
	}
	close(x.epfd);
	close_conns(conn, 1);
	return rc;
}

static const struct probe_mode epoll_ctl_mode = {
	.name = "epoll-ctl",
	.summary = "an epoll_ctl(2) EPOLL_CTL_MOD of a TCP socket, EPOLLIN <-> EPOLLIN|EPOLLOUT",
	.usage = USAGE_CALLS_PER_BATCH,
	.flags = F_COMMON | F_BATCH_US | F_CALLS,
	.defaults = "--batches 300 --warmup-batches 30 --batch-us 50",
	.min_n = 1,
	.run = mode_epoll_ctl,
};
PROBE_MODE(epoll_ctl_mode);
