/*
 * cost-probe: measures the per-call costs of the echo cost model.
 *
 * Every mode writes raw samples as CSV, one row per timed batch (warm-up
 * batches included and flagged), preceded by "# key=value" metadata lines.
 * Batches, not single calls, are timed so that the timer's own cost stays
 * far below the interval it measures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/timing.h"
#include "config.h"

#define PROG "cost-probe"
#define RAW_FORMAT_VERSION 1

/* Syscall number the kernel does not implement: returns -ENOSYS after the
 * entry/exit path only, the purest "switch cost" s. */
#define INVALID_SYSCALL_NR (-1L)

struct options {
	long long batches;
	long long warmup_batches;
	long long batch_us;
	long long calls_per_batch; /* 0: calibrate from batch_us */
	long long seed;
	int cpu;                   /* -1: not pinned */
	const char *output;
	const char *variants;
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " MODE [OPTIONS]\n"
		"\n"
		"Measures per-call kernel costs; writes raw CSV, one row per timed batch.\n"
		"\n"
		"Modes:\n"
		"  syscall            null-syscall cost s: getppid(2) and an unimplemented\n"
		"                     syscall number (ENOSYS)\n"
		"\n"
		"Options:\n"
		"  --batches N        measured batches per variant (default 200)\n"
		"  --warmup-batches N batches per variant run first and flagged warmup=1\n"
		"                     (default 20)\n"
		"  --batch-us US      target duration of one timed batch in microseconds;\n"
		"                     sets calls per batch (default 50)\n"
		"  --calls-per-batch K  fixed calls per batch instead of calibrating\n"
		"  --variants LIST    comma-separated subset of: getppid,enosys (default both)\n"
		"  --seed S           seed for the randomised batch order (default 1)\n"
		"  --cpu C            pin to CPU C and record it (default: not pinned)\n"
		"  --output FILE      write the CSV to FILE instead of standard output\n"
		"  -h, --help         show this help\n"
		"\n"
		"Output columns: mode,variant,seq,batch,warmup,calls,ns,cpu\n"
		"  seq: position in the randomised run order; batch: index within the\n"
		"  variant; ns: wall time of the whole batch including one timer pair,\n"
		"  whose median cost is given in the timer_overhead_ns metadata line.\n");
}

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

static void shuffle_ints(int *a, size_t n, uint64_t seed)
{
	uint64_t s = seed ? seed : 0x9E3779B97F4A7C15ULL;

	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rng_next(&s) % i);
		int t = a[i - 1];

		a[i - 1] = a[j];
		a[j] = t;
	}
}

enum syscall_variant { VAR_GETPPID, VAR_ENOSYS, VAR_COUNT };
static const char *const variant_names[VAR_COUNT] = { "getppid", "enosys" };

/* One batch of `calls` syscalls of one variant; returns elapsed ns. */
static uint64_t run_syscall_batch(enum syscall_variant v, long long calls)
{
	uint64_t t0, t1;

	t0 = now_ns();
	if (v == VAR_GETPPID) {
		for (long long i = 0; i < calls; i++)
			(void)syscall(SYS_getppid);
	} else {
		for (long long i = 0; i < calls; i++)
			(void)syscall(INVALID_SYSCALL_NR);
	}
	t1 = now_ns();
	return t1 - t0;
}

static void parse_variants(const char *list, int enabled[VAR_COUNT])
{
	char *copy = strdup(list), *save = NULL, *tok;

	if (!copy) {
		perror("strdup");
		exit(2);
	}
	memset(enabled, 0, sizeof(int) * VAR_COUNT);
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int found = 0;

		for (int v = 0; v < VAR_COUNT; v++) {
			if (strcmp(tok, variant_names[v]) == 0) {
				enabled[v] = 1;
				found = 1;
			}
		}
		if (!found) {
			fprintf(stderr, PROG ": --variants: unknown variant '%s' (known: getppid,enosys)\n", tok);
			free(copy);
			exit(2);
		}
	}
	free(copy);
}

static int mode_syscall(const struct options *o, FILE *out)
{
	int enabled[VAR_COUNT];
	long long calls[VAR_COUNT] = { 0 };
	double timer_ns;
	size_t nvar = 0, per_var, total, k = 0;
	int *order;
	long long *batch_index;

	parse_variants(o->variants, enabled);

	/* The ENOSYS variant is only meaningful if the number really is
	 * unimplemented; check once rather than trusting it. */
	errno = 0;
	if (enabled[VAR_ENOSYS] && (syscall(INVALID_SYSCALL_NR) != -1 || errno != ENOSYS)) {
		fprintf(stderr, PROG ": syscall %ld did not fail with ENOSYS (%s); cannot measure the null syscall this way\n",
			INVALID_SYSCALL_NR, strerror(errno));
		return 1;
	}

	timer_ns = timer_overhead_ns(10001);
	for (int v = 0; v < VAR_COUNT; v++) {
		if (!enabled[v])
			continue;
		nvar++;
		if (o->calls_per_batch > 0) {
			calls[v] = o->calls_per_batch;
		} else {
			/* Calibrate: cost of one call from a 2000-call pilot batch. */
			uint64_t pilot = run_syscall_batch((enum syscall_variant)v, 2000);
			double per_call = (double)pilot / 2000.0;

			calls[v] = (long long)((double)o->batch_us * 1000.0 / (per_call > 1.0 ? per_call : 1.0)) + 1;
		}
	}
	/* Timer overhead must stay below 5 % of the smallest interval timed. */
	for (int v = 0; v < VAR_COUNT; v++) {
		if (!enabled[v])
			continue;
		uint64_t probe = run_syscall_batch((enum syscall_variant)v, calls[v]);

		if (timer_ns > 0.05 * (double)probe) {
			fprintf(stderr, PROG ": timer overhead %.0f ns is more than 5%% of a %s batch (%llu ns); raise --batch-us or --calls-per-batch\n",
				timer_ns, variant_names[v], (unsigned long long)probe);
			return 1;
		}
	}

	per_var = (size_t)(o->warmup_batches + o->batches);
	total = per_var * nvar;
	order = malloc(total * sizeof(*order));
	batch_index = calloc(VAR_COUNT, sizeof(*batch_index));
	if (!order || !batch_index) {
		perror("malloc");
		return 2;
	}
	/* Warm-up batches first (shuffled among themselves), then the measured
	 * ones in a random interleaving so drift hits every variant alike. */
	{
		size_t w = 0, m = (size_t)o->warmup_batches * nvar;

		for (int v = 0; v < VAR_COUNT; v++) {
			if (!enabled[v])
				continue;
			for (long long i = 0; i < o->warmup_batches; i++)
				order[w++] = v;
			for (long long i = 0; i < o->batches; i++)
				order[m++] = v;
		}
		shuffle_ints(order, (size_t)o->warmup_batches * nvar, (uint64_t)o->seed);
		shuffle_ints(order + (size_t)o->warmup_batches * nvar,
			     (size_t)o->batches * nvar, (uint64_t)o->seed + 1);
	}

	if (fprintf(out, "# iolab-raw: cost-probe syscall v%d\n", RAW_FORMAT_VERSION) < 0 ||
	    fprintf(out, "# timer_overhead_ns=%.1f\n", timer_ns) < 0 ||
	    fprintf(out, "# batch_us=%lld\n# seed=%lld\n# pinned_cpu=%d\n# liburing=%s\n",
		    o->batch_us, o->seed, o->cpu, IOLAB_LIBURING_VERSION) < 0 ||
	    fprintf(out, "mode,variant,seq,batch,warmup,calls,ns,cpu\n") < 0) {
		perror("write");
		return 1;
	}
	for (k = 0; k < total; k++) {
		int v = order[k];
		long long b = batch_index[v]++;
		int warm = b < o->warmup_batches;
		uint64_t ns = run_syscall_batch((enum syscall_variant)v, calls[v]);
		int cpu = sched_getcpu();

		if (fprintf(out, "syscall,%s,%zu,%lld,%d,%lld,%llu,%d\n", variant_names[v], k,
			    warm ? b : b - o->warmup_batches, warm, calls[v],
			    (unsigned long long)ns, cpu) < 0) {
			perror("write");
			return 1;
		}
	}
	free(order);
	free(batch_index);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "batches", required_argument, NULL, 'b' },
		{ "warmup-batches", required_argument, NULL, 'w' },
		{ "batch-us", required_argument, NULL, 'u' },
		{ "calls-per-batch", required_argument, NULL, 'k' },
		{ "variants", required_argument, NULL, 'v' },
		{ "seed", required_argument, NULL, 's' },
		{ "cpu", required_argument, NULL, 'c' },
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = {
		.batches = 200, .warmup_batches = 20, .batch_us = 50,
		.calls_per_batch = 0, .seed = 1, .cpu = -1, .output = NULL,
		.variants = "getppid,enosys",
	};
	const char *mode;
	FILE *out = stdout;
	int opt, rc;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, PROG ": missing MODE (one of: syscall); see --help\n");
		return 2;
	}
	mode = argv[1];
	optind = 2;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'b': o.batches = parse_int_flag(PROG, "--batches", optarg, 1, 100000000); break;
		case 'w': o.warmup_batches = parse_int_flag(PROG, "--warmup-batches", optarg, 0, 100000000); break;
		case 'u': o.batch_us = parse_int_flag(PROG, "--batch-us", optarg, 1, 60000000); break;
		case 'k': o.calls_per_batch = parse_int_flag(PROG, "--calls-per-batch", optarg, 1, 1000000000); break;
		case 'v': o.variants = optarg; break;
		case 's': o.seed = parse_int_flag(PROG, "--seed", optarg, 0, INT64_MAX); break;
		case 'c': o.cpu = (int)parse_int_flag(PROG, "--cpu", optarg, 0, CPU_SETSIZE - 1); break;
		case 'o': o.output = optarg; break;
		case 'h': usage(stdout); return 0;
		default:
			fprintf(stderr, PROG ": bad option; see --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, PROG ": unexpected argument '%s'; see --help\n", argv[optind]);
		return 2;
	}
	if (strcmp(mode, "syscall") != 0) {
		fprintf(stderr, PROG ": unknown mode '%s' (known: syscall); see --help\n", mode);
		return 2;
	}
	if (o.cpu >= 0)
		pin_to_cpu(PROG, o.cpu);
	if (o.output) {
		out = fopen(o.output, "w");
		if (!out) {
			fprintf(stderr, PROG ": --output %s: %s\n", o.output, strerror(errno));
			return 2;
		}
	}
	rc = mode_syscall(&o, out);
	if (fflush(out) != 0 || (out != stdout && fclose(out) != 0)) {
		fprintf(stderr, PROG ": writing output: %s\n", strerror(errno));
		return 1;
	}
	return rc;
}
