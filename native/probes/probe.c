#define _GNU_SOURCE
#include "probe.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include "../common/timing.h"
#include "config.h"

/* xorshift64*: small, seedable, good enough to shuffle a run order. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545F4914F6CDD1DULL;
}

void shuffle_size(size_t *a, size_t n, uint64_t seed)
{
	uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;

	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rng_next(&s) % i);
		size_t t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

long long max_queued_bytes(const struct int_list *bytes, long long calls)
{
	long long maxbytes = 1;

	for (size_t i = 0; i < bytes->n; i++)
		if (bytes->v[i] > maxbytes)
			maxbytes = bytes->v[i];
	if (calls * maxbytes > (1 << 20)) {
		fprintf(stderr, PROG ": --calls-per-batch %lld x %lld bytes exceeds the 1 MiB a batch may queue; lower one of them\n",
			calls, maxbytes);
		exit(2);
	}
	return maxbytes;
}

int write_header(struct raw_out *out, const char *mode, const struct probe_opts *o, double timer_ns)
{
	raw_printf(out, "# iolab-raw: cost-probe %s v%d\n", mode, RAW_FORMAT_VERSION);
	raw_printf(out, "# timer_overhead_ns=%.1f\n# seed=%lld\n# pinned_cpu=%d\n# liburing=%s\n",
		   timer_ns, o->seed, o->cpu, IOLAB_LIBURING_VERSION);
	return raw_printf(out, "mode,variant,transport,pattern,ack,bytes,n,connections,seq,batch,warmup,"
			       "calls,ns,cpu,emptied,not_inline\n") ? 1 : 0;
}

int run_cells(struct raw_out *out, const char *mode, const struct probe_opts *o, struct cell *cells,
	      size_t ncells, batch_fn fn)
{
	size_t warm = (size_t)o->warmup_batches * ncells;
	size_t total = warm + (size_t)o->batches * ncells;
	size_t *order = malloc((total ? total : 1) * sizeof(*order));
	size_t w = 0, m = warm;

	if (!order) {
		perror("malloc");
		return 1;
	}
	for (size_t c = 0; c < ncells; c++) {
		for (long long i = 0; i < o->warmup_batches; i++)
			order[w++] = c;
		for (long long i = 0; i < o->batches; i++)
			order[m++] = c;
	}
	shuffle_size(order, warm, (uint64_t)o->seed);
	shuffle_size(order + warm, total - warm, (uint64_t)o->seed + 1);

	for (size_t k = 0; k < total; k++) {
		struct cell *c = &cells[order[k]];
		struct batch_result r = { 0, 0, 0, 0 };
		int is_warm = c->batch < o->warmup_batches;
		long long b = is_warm ? c->batch : c->batch - o->warmup_batches;

		fn(c, &r);
		c->batch++;
		if (!is_warm) {
			c->sqes += r.calls * c->n;
			c->not_inline += r.not_inline;
		}
		/* A failed write ends the run; main's raw_close names the file. */
		if (raw_printf(out, "%s,%s,%s,%s,%s,%lld,%lld,%lld,%zu,%lld,%d,%lld,%llu,%d,%lld,%lld\n",
			       mode, c->variant, c->transport, c->pattern, c->ack ? c->ack : "-", c->bytes, c->n,
			       c->connections, k, b, is_warm, r.calls, (unsigned long long)r.ns,
			       sched_getcpu(), r.emptied, r.not_inline)) {
			free(order);
			return 1;
		}
	}
	free(order);
	return 0;
}

long long calls_per_batch(const struct probe_opts *o, const char *what, double timer_ns, time_calls_fn fn, void *ctx)
{
	long long calls = o->calls_per_batch;
	uint64_t probe;

	if (calls <= 0) {
		double per_call = (double)fn(ctx, 2000) / 2000.0;

		calls = (long long)((double)o->batch_us * 1000.0 / (per_call > 1.0 ? per_call : 1.0)) + 1;
	}
	/* Timer overhead must stay below 5 % of the interval timed. */
	probe = fn(ctx, calls);
	if (timer_ns > 0.05 * (double)probe) {
		fprintf(stderr, PROG ": timer overhead %.0f ns is more than 5%% of one %s batch (%llu ns); raise --batch-us or --calls-per-batch\n",
			timer_ns, what, (unsigned long long)probe);
		return 0;
	}
	return calls;
}
