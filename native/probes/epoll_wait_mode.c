/* epoll-wait mode: what an epoll server pays to learn what is ready, one
 * epoll_wait(2) with a zero timeout, over an eventfd that is readable
 * (one event returned, as when a request waits) or not (none returned, as
 * when a server polls an idle set). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "../common/timing.h"
#include "probe.h"

enum { VAR_READY, VAR_EMPTY, VAR_COUNT };
static const char *const variant_names[VAR_COUNT] = { "ready", "empty" };

struct ew_ctx {
	int epfd;
	int expect;             /* events each call must return */
	long long calls;
	long long wrong;        /* calls that returned another count */
};

static uint64_t wait_batch(struct ew_ctx *x, long long calls)
{
	struct epoll_event ev;
	uint64_t t0 = now_ns();

	for (long long i = 0; i < calls; i++)
		if (epoll_wait(x->epfd, &ev, 1, 0) != x->expect)
			x->wrong++;
	return now_ns() - t0;
}

static uint64_t time_calls(void *ctx, long long calls)
{
	return wait_batch(ctx, calls);
}

static void run_batch(struct cell *c, struct batch_result *r)
{
	struct ew_ctx *x = c->ctx;

	r->calls = x->calls;
	r->ns = wait_batch(x, x->calls);
}

/* An epoll set watching one eventfd, left readable (counter 1, never read:
 * level-triggered, it stays ready) or not. */
static int open_set(int ready, struct ew_ctx *x)
{
	int efd = eventfd(ready ? 1 : 0, EFD_NONBLOCK | EFD_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN };

	if (efd < 0) {
		fprintf(stderr, PROG ": eventfd: %s\n", strerror(errno));
		return -1;
	}
	x->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (x->epfd < 0) {
		fprintf(stderr, PROG ": epoll_create1: %s\n", strerror(errno));
		close(efd);
		return -1;
	}
	if (epoll_ctl(x->epfd, EPOLL_CTL_ADD, efd, &ev) != 0) {
		fprintf(stderr, PROG ": epoll_ctl: %s\n", strerror(errno));
		close(efd);
		close(x->epfd);
		return -1;
	}
	/* The set holds the eventfd's file; closing our descriptor would remove
	 * it from the set, so it stays open until exit. */
	x->expect = ready ? 1 : 0;
	x->wrong = 0;
	return 0;
}

static int mode_epoll_wait(const struct probe_opts *o, struct raw_out *out)
{
	unsigned set = parse_name_set(PROG, "--variants", o->variants, variant_names, VAR_COUNT);
	struct cell cells[VAR_COUNT];
	struct ew_ctx ctx[VAR_COUNT];
	size_t ncells = 0;
	double timer_ns = timer_overhead_ns(10001);
	int rc;

	for (int v = 0; v < VAR_COUNT; v++) {
		if (!(set & (1u << v)))
			continue;
		if (open_set(v == VAR_READY, &ctx[v]) != 0)
			return 1;
		ctx[v].calls = calls_per_batch(o, variant_names[v], timer_ns, time_calls, &ctx[v]);
		if (ctx[v].calls == 0)
			return 1;
		cells[ncells++] = (struct cell){ .variant = variant_names[v], .transport = "-",
						 .pattern = "-", .bytes = 0, .n = 1,
						 .connections = 0, .ctx = &ctx[v] };
	}
	if (raw_printf(out, "# batch_us=%lld\n", o->batch_us) || write_header(out, "epoll-wait", o, timer_ns))
		return 1;
	rc = run_cells(out, "epoll-wait", o, cells, ncells, run_batch);
	/* A wait that returned another count timed something else: the rows
	 * are not what they say, so the run fails. */
	for (size_t i = 0; i < ncells; i++) {
		const struct ew_ctx *x = cells[i].ctx;

		if (x->wrong) {
			fprintf(stderr, PROG ": %lld epoll_wait calls of variant %s returned other than %d event(s)\n",
				x->wrong, cells[i].variant, x->expect);
			return 1;
		}
	}
	return rc;
}

static const struct probe_mode epoll_wait_mode = {
	.name = "epoll-wait",
	.summary = "an epoll_wait(2) with zero timeout: one ready eventfd, or none",
	.usage = "  --variants LIST      subset of ready,empty\n" USAGE_CALLS_PER_BATCH,
	.flags = F_COMMON | F_VARIANTS | F_BATCH_US | F_CALLS,
	.defaults = "--batches 300 --warmup-batches 30 --batch-us 50 --variants ready,empty",
	.min_n = 1,
	.run = mode_epoll_wait,
};
PROBE_MODE(epoll_wait_mode);
