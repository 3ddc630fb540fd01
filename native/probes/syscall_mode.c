/* syscall mode: the switch cost s, from getppid(2) and an unimplemented
 * syscall number (ENOSYS: the entry/exit path alone). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/timing.h"
#include "probe.h"

#define INVALID_SYSCALL_NR (-1L)

enum { VAR_GETPPID, VAR_ENOSYS, VAR_COUNT };
static const char *const variant_names[VAR_COUNT] = { "getppid", "enosys" };

static uint64_t syscall_batch(int variant, long long calls)
{
	uint64_t t0 = now_ns();

	if (variant == VAR_GETPPID) {
		for (long long i = 0; i < calls; i++)
			(void)syscall(SYS_getppid);
	} else {
		for (long long i = 0; i < calls; i++)
			(void)syscall(INVALID_SYSCALL_NR);
	}
	return now_ns() - t0;
}

struct sc_ctx {
	int variant;
	long long calls;
};

static uint64_t time_calls(void *ctx, long long calls)
{
	const struct sc_ctx *x = ctx;

	return syscall_batch(x->variant, calls);
}

static void run_batch(struct cell *c, struct batch_result *r)
{
	const struct sc_ctx *x = c->ctx;

	r->calls = x->calls;
	r->ns = syscall_batch(x->variant, x->calls);
}

static int mode_syscall(const struct probe_opts *o, struct raw_out *out)
{
	unsigned set = parse_name_set(PROG, "--variants", o->variants, variant_names, VAR_COUNT);
	struct cell cells[VAR_COUNT];
	struct sc_ctx ctx[VAR_COUNT];
	size_t ncells = 0;
	double timer_ns = timer_overhead_ns(10001);

	errno = 0;
	if ((set & (1u << VAR_ENOSYS)) && (syscall(INVALID_SYSCALL_NR) != -1 || errno != ENOSYS)) {
		fprintf(stderr, PROG ": syscall %ld did not fail with ENOSYS (%s); cannot measure the null syscall this way\n",
			INVALID_SYSCALL_NR, strerror(errno));
		return 1;
	}
	for (int v = 0; v < VAR_COUNT; v++) {
		if (!(set & (1u << v)))
			continue;
		ctx[v].variant = v;
		ctx[v].calls = calls_per_batch(o, variant_names[v], timer_ns, time_calls, &ctx[v]);
		if (ctx[v].calls == 0)
			return 1;
		cells[ncells++] = (struct cell){ .variant = variant_names[v], .transport = "-",
						 .pattern = "-", .bytes = 0, .n = 1,
						 .connections = 0, .ctx = &ctx[v] };
	}
	if (raw_printf(out, "# batch_us=%lld\n", o->batch_us) || write_header(out, "syscall", o, timer_ns))
		return 1;
	return run_cells(out, "syscall", o, cells, ncells, run_batch);
}

static const struct probe_mode syscall_mode = {
	.name = "syscall",
	.summary = "s: getppid(2) and an unimplemented syscall (ENOSYS)",
	.usage = "  --variants LIST      subset of getppid,enosys\n" USAGE_CALLS_PER_BATCH,
	.flags = F_COMMON | F_VARIANTS | F_BATCH_US | F_CALLS,
	.defaults = "--batches 300 --warmup-batches 30 --batch-us 50 --variants getppid,enosys",
	.min_n = 1,
	.run = mode_syscall,
};
PROBE_MODE(syscall_mode);
