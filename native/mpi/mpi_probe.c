/* mpi-probe: ping-pong, bcast, allreduce, alltoall and barrier timings with
 * every timed iteration kept on every rank.
 *
 * Cells are (benchmark, message size, series); their order is shuffled with
 * --seed (the same on every rank). Each series runs warm-up iterations, then
 * timed ones. Every iteration's buffers are filled before and checked after
 * the timed region, so validation never counts in a time; a wrong result
 * aborts the run. Rank 0 writes one CSV row per (iteration, rank); the time of
 * a collective iteration is the maximum over ranks, derived later.
 *
 * Synchronisation of the timed region:
 *   barrier  MPI_Barrier before each iteration (as the OSU benchmarks do);
 *   window   clocks are offset-corrected against rank 0 and every iteration
 *            starts at a common instant, one window apart (as ReproMPI does);
 *            a rank that reaches the start late marks the iteration late=1.
 * Ping-pong ignores both: the peer posts its receive and sends a zero-byte
 * "ready", then rank 0 times from its send to the echo's arrival.
 *
 * --method osu times as the OSU micro-benchmarks (5.3) do, for comparisons
 * with studies that used them: buffers are filled and checked once, in an
 * untimed pass before the series and again after it, and the timed loop
 * reuses them unchanged; collectives run skip + iterations times with a
 * barrier after each, ping-pong runs osu_latency's back-to-back loop; OSU's
 * skip and iteration counts by size; allreduce sums floats. Rows are named
 * after the OSU program (osu_bcast, ...) and still hold every iteration on
 * every rank, so OSU's statistic (each rank's mean, then the average,
 * minimum and maximum over ranks) is derived later, as is ours.
 *
 * This file is the command line, the cells and the run; mpi_ops.c holds the
 * operations and their checks, mpi_sync.c the window synchronisation,
 * mpi_osu.c the OSU method and mpi_meta.c what ran.
 */
#define _GNU_SOURCE
#include <mpi.h>

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/lists.h"
#include "../common/raw_out.h"
#include "../common/timing.h"
#include "mpi_probe.h"

/* The run's shared state and names, declared in mpi_probe.h. */
const char *prog = "mpi-probe";
const char *const bench_names[B_COUNT] = {"pingpong", "bcast", "allreduce", "alltoall", "barrier"};
const char *const bench_cvar[B_COUNT] = {NULL, "coll_tuned_bcast_algorithm",
	"coll_tuned_allreduce_algorithm", "coll_tuned_alltoall_algorithm", "coll_tuned_barrier_algorithm"};
const char *const osu_names[B_COUNT] = {"osu_latency", "osu_bcast", "osu_allreduce", "osu_alltoall",
	"osu_barrier"};
const char *const sync_names[2] = {"barrier", "window"};
const char *const method_names[2] = {"probe", "osu"};
const long long osu_coll_counts[4] = {200, 1000, 10, 100}; /* skip, iters; large */
const long long osu_lat_counts[4] = {100, 10000, 10, 1000};
int rank, nranks, lie, osu;
uint64_t delay_ns;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: mpirun [mpirun options] mpi-probe [options]\n"
		"\n"
		"Times MPI ping-pong, bcast, allreduce, alltoall and barrier, keeping every\n"
		"timed iteration on every rank. Writes CSV (one row per iteration and rank)\n"
		"with '# meta: {json}' lines for the run and each collective's algorithm.\n"
		"\n"
		"  --bench LIST         pingpong,bcast,allreduce,alltoall,barrier (default: all)\n"
		"  --sizes LIST         message sizes in bytes (default: powers of two 1..1048576);\n"
		"                       per destination for alltoall, ignored by barrier\n"
		"  --warmup N           untimed iterations before each series (default 10)\n"
		"  --iterations N       timed iterations per series (default 100)\n"
		"  --series N           series per (benchmark, size); the seed's method took\n"
		"                       the mean of the 3 smallest of 10-20 (default 10)\n"
		"  --large-bytes B      sizes above B use --large-iterations (default 65536)\n"
		"  --large-iterations N timed iterations per series for large sizes (default 20)\n"
		"  --sync MODE          barrier (default): MPI_Barrier before each iteration;\n"
		"                       window: offset-corrected clocks, common start times;\n"
		"                       ping-pong is self-synchronised under either\n"
		"  --window-us US       window length; 0 (default) derives it from the warm-up\n"
		"  --seed S             shuffles the order of cells (default 1)\n"
		"  --method M           probe (default): the timing described above;\n"
		"                       osu: OSU micro-benchmarks 5.3's method (buffers checked\n"
		"                       in untimed passes, barrier after each iteration,\n"
		"                       osu_latency's loop, OSU's counts: collectives skip\n"
		"                       200/10 and time 1000/100 iterations, ping-pong skips\n"
		"                       100/10 and times 10000/1000, large above 8192\n"
		"                       elements; --warmup/--iterations override both sizes);\n"
		"                       allreduce sums floats, so sizes not a multiple of 4 B\n"
		"                       are left out, as OSU does; rows are named osu_<bench>\n"
		"  --inject-error RANK  testing: RANK perturbs its input, so validation must fail\n"
		"                       (bcast: only the root has input; ping-pong: either end)\n"
		"  --delay-rank RANK    testing: RANK spins --delay-us inside every timed\n"
		"  --delay-us US        collective iteration, before the collective (default 0)\n"
		"  --output FILE        CSV written by rank 0 (default: stdout)\n"
		"  --help               this text\n"
		"\n"
		"Ping-pong runs between rank 0 and the last rank; other ranks wait. A\n"
		"validation failure prints one line naming the benchmark, size, iteration\n"
		"and rank, and aborts with status 3.\n");
}

/* Parse before MPI_Init so --help works without mpirun; only the first rank
 * (from the launcher's environment) prints a parse error, so a bad flag gives
 * one line, not one per rank. */
static int launcher_rank(void)
{
	const char *vars[] = {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		if (v)
			return atoi(v);
	}
	return 0;
}

/* The index of `value` among a flag's two names, or one line and exit 2. */
static int parse_either(const char *value, const char *flag, const char *const names[2])
{
	for (int i = 0; i < 2; i++)
		if (!strcmp(value, names[i]))
			return i;
	fprintf(stderr, "%s: %s: '%s' is not %s or %s\n", prog, flag, value, names[0], names[1]);
	exit(2);
}

static struct options parse(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"bench", required_argument, 0, 'b'}, {"sizes", required_argument, 0, 's'},
		{"warmup", required_argument, 0, 'w'}, {"iterations", required_argument, 0, 'i'},
		{"series", required_argument, 0, 'n'}, {"large-bytes", required_argument, 0, 'L'},
		{"large-iterations", required_argument, 0, 'I'}, {"sync", required_argument, 0, 'y'},
		{"window-us", required_argument, 0, 'W'}, {"seed", required_argument, 0, 'S'},
		{"inject-error", required_argument, 0, 'E'}, {"output", required_argument, 0, 'o'},
		{"method", required_argument, 0, 'M'}, {"delay-rank", required_argument, 0, 'D'},
		{"delay-us", required_argument, 0, 'U'},
		{"help", no_argument, 0, 'h'}, {0, 0, 0, 0},
	};
	struct options o = {
		.benches = (1u << B_COUNT) - 1, .warmup = 10, .iterations = 100, .series = 10,
		.large_bytes = 65536, .large_iterations = 20, .sync = SYNC_BARRIER, .seed = 1,
		.inject_rank = -1, .delay_rank = -1, .method = METHOD_PROBE,
	};
	int saved = -1, c;

	if (launcher_rank() != 0) {
		saved = dup(STDERR_FILENO);
		if (saved < 0 || !freopen("/dev/null", "w", stderr))
			saved = -1;
	}
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		switch (c) {
		case 'b': o.benches = parse_name_set(prog, "--bench", optarg, bench_names, B_COUNT); break;
		case 's': free(o.sizes.v); o.sizes = parse_int_list(prog, "--sizes", optarg, 1, 1LL << 30); break;
		case 'w': o.warmup = parse_int_flag(prog, "--warmup", optarg, 0, 100000000); o.set_warmup = 1; break;
		case 'i':
			o.iterations = parse_int_flag(prog, "--iterations", optarg, 1, 100000000);
			o.set_iterations = 1;
			break;
		case 'n': o.series = parse_int_flag(prog, "--series", optarg, 1, 100000); break;
		case 'L': o.large_bytes = parse_int_flag(prog, "--large-bytes", optarg, 0, 1LL << 30); break;
		case 'I':
			o.large_iterations = parse_int_flag(prog, "--large-iterations", optarg, 1, 100000000);
			o.set_large_iterations = 1;
			break;
		case 'M': o.method = (enum method)parse_either(optarg, "--method", method_names); break;
		case 'D': o.delay_rank = parse_int_flag(prog, "--delay-rank", optarg, 0, 1 << 24); break;
		case 'U': o.delay_us = parse_int_flag(prog, "--delay-us", optarg, 0, 10000000); break;
		case 'y': o.sync = (enum sync_mode)parse_either(optarg, "--sync", sync_names); break;
		case 'W': o.window_us = parse_int_flag(prog, "--window-us", optarg, 0, 100000000); break;
		case 'S': o.seed = parse_int_flag(prog, "--seed", optarg, 0, INT64_MAX); break;
		case 'E': o.inject_rank = parse_int_flag(prog, "--inject-error", optarg, 0, 1 << 24); break;
		case 'o': o.output = optarg; break;
		case 'h': usage(stdout); exit(0);
		default: fprintf(stderr, "%s: see --help\n", prog); exit(2);
		}
	}
	reject_extra_args(prog, optind, argc, argv);
	if (!o.sizes.n) {
		o.sizes.n = 21;
		o.sizes.v = malloc(o.sizes.n * sizeof(*o.sizes.v));
		if (!o.sizes.v) {
			fprintf(stderr, "%s: out of memory\n", prog);
			exit(1);
		}
		for (size_t i = 0; i < o.sizes.n; i++)
			o.sizes.v[i] = 1LL << i;
	}
	if (saved >= 0) {
		fflush(stderr);
		if (dup2(saved, STDERR_FILENO) < 0)
			exit(1);
		close(saved);
	}
	return o;
}

long long tick; /* distinct pattern per iteration, warm-up included */

/* ---- the run ------------------------------------------------------------ */

static uint64_t rng_state;
static uint64_t rng_next(void)
{
	/* splitmix64: the same sequence on every rank for the same --seed */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static struct cell *make_cells(const struct options *o, size_t *count)
{
	size_t n = 0, cap = (size_t)B_COUNT * (o->sizes.n + 1) * (size_t)o->series;
	struct cell *cells = xmalloc(cap * sizeof(*cells));

	for (int b = 0; b < B_COUNT; b++) {
		if (!(o->benches & (1u << b)))
			continue;
		size_t nsizes = b == B_BARRIER ? 1 : o->sizes.n;
		for (size_t s = 0; s < nsizes; s++) {
			if (o->method == METHOD_OSU && b == B_ALLREDUCE && o->sizes.v[s] % (long long)sizeof(float))
				continue; /* osu_allreduce sends whole floats */
			for (int k = 0; k < o->series; k++)
				cells[n++] = (struct cell){b, b == B_BARRIER ? 0 : o->sizes.v[s], k};
		}
	}
	rng_state = (uint64_t)o->seed;
	for (size_t i = n; i > 1; i--) {
		size_t j = (size_t)(rng_next() % i);
		struct cell t = cells[i - 1];
		cells[i - 1] = cells[j];
		cells[j] = t;
	}
	*count = n;
	return cells;
}


/* One series: warm-up, then timed iterations; times[i] and late[i] per rank.
 * Returns the window used (0 under barrier synchronisation). */
static uint64_t run_series(const struct options *o, const struct cell *c, struct buffers *b,
			   long long iters, int64_t *times, int64_t *late)
{
	uint64_t slowest_cycle = 0, window = 0, start = 0;
	int64_t offset = 0;

	b->bytes = (size_t)c->bytes;
	for (long long w = 0; w < o->warmup; w++) {
		uint64_t t0 = now_ns();
		checked_pass(c, b, tick++);
		uint64_t cycle = now_ns() - t0;
		if (cycle > slowest_cycle)
			slowest_cycle = cycle;
	}
	if (o->sync == SYNC_WINDOW && c->bench != B_PINGPONG) {
		offset = clock_offset_ns(30);
		if (o->window_us)
			window = (uint64_t)o->window_us * 1000;
		else {
			/* Room for the slowest warm-up cycle (fill + operation + check)
			 * on any rank, with a margin. */
			uint64_t all = 0;
			check_mpi(MPI_Allreduce(&slowest_cycle, &all, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD),
				  "MPI_Allreduce");
			window = all + all / 2 + 20000;
		}
		if (rank == 0)
			start = now_ns() + 2 * window + 100000;
		check_mpi(MPI_Bcast(&start, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "MPI_Bcast");
	}
	for (long long i = 0; i < iters; i++) {
		long long it = tick++;
		uint64_t t0, t1;
		fill(c->bench, b, it);
		if (c->bench == B_PINGPONG) {
			late[i] = 0;
			times[i] = (int64_t)pingpong_round(b);
			validate(c->bench, b, c->series, it);
			continue;
		}
		if (o->sync == SYNC_WINDOW) {
			uint64_t target = start + (uint64_t)i * window;
			late[i] = wait_until(target, offset);
			t0 = target - (uint64_t)offset; /* the common start, on this rank's clock */
		} else {
			check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
			late[i] = 0;
			t0 = now_ns();
		}
		spin(delay_ns);
		run_once(c->bench, b);
		t1 = now_ns();
		times[i] = (int64_t)(t1 - t0);
		validate(c->bench, b, c->series, it);
	}
	return window;
}

int main(int argc, char **argv)
{
	struct options o = parse(argc, argv);
	struct buffers b = {0};
	size_t ncells, max_bytes = 0;
	struct raw_out out = { stdout, "standard output", 0 };
	int name_len;

	if (o.sync == SYNC_WINDOW && !o.window_us && !o.warmup) {
		if (launcher_rank() == 0)
			fprintf(stderr, "%s: --sync window needs --window-us or --warmup > 0 to size the window\n", prog);
		return 2;
	}
	check_mpi(MPI_Init(&argc, &argv), "MPI_Init");
	MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	lie = o.inject_rank == rank;
	osu = o.method == METHOD_OSU;
	delay_ns = o.delay_rank == rank ? (uint64_t)o.delay_us * 1000 : 0;
	if (o.inject_rank >= nranks) {
		if (rank == 0)
			fprintf(stderr, "%s: --inject-error %lld: there are only %d ranks\n", prog, o.inject_rank, nranks);
		MPI_Finalize();
		return 2;
	}
	if (o.delay_rank >= nranks) {
		if (rank == 0)
			fprintf(stderr, "%s: --delay-rank %lld: there are only %d ranks\n", prog, o.delay_rank, nranks);
		MPI_Finalize();
		return 2;
	}
	if ((o.benches & (1u << B_PINGPONG)) && nranks < 2) {
		if (rank == 0)
			fprintf(stderr, "%s: pingpong needs at least 2 ranks (run under mpirun -np 2)\n", prog);
		MPI_Finalize();
		return 2;
	}
	for (size_t i = 0; i < o.sizes.n; i++)
		if ((size_t)o.sizes.v[i] > max_bytes)
			max_bytes = (size_t)o.sizes.v[i];
	if (max_bytes > (size_t)INT32_MAX / (size_t)nranks) {
		if (rank == 0)
			fprintf(stderr, "%s: --sizes: %zu B per rank times %d ranks exceeds an MPI count\n", prog, max_bytes, nranks);
		MPI_Finalize();
		return 2;
	}

	char(*procs)[MPI_MAX_PROCESSOR_NAME] = xmalloc((size_t)nranks * MPI_MAX_PROCESSOR_NAME);
	char me[MPI_MAX_PROCESSOR_NAME] = {0};
	MPI_Get_processor_name(me, &name_len);
	check_mpi(MPI_Gather(me, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, procs, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, 0,
			     MPI_COMM_WORLD), "MPI_Gather");

	if (rank == 0 && raw_open(&out, o.output)) {
		fprintf(stderr, "%s: cannot write %s: %s\n", prog, o.output, strerror(out.err));
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	if (rank == 0) {
		write_meta(&out, &o, procs);
		raw_printf(&out, "bench,bytes,ranks,series,iteration,rank,ns,late,window_ns\n");
	} else {
		int provided;
		/* MPI_T is initialised on every rank: reading cvars is local, but
		 * keep the ranks symmetric. */
		if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS)
			MPI_T_finalize();
	}

	struct cell *cells = make_cells(&o, &ncells);
	long long max_iters = 1;
	for (size_t ci = 0; ci < ncells; ci++) {
		long long warmup, iters;
		cell_counts(&o, &cells[ci], &warmup, &iters);
		if (iters > max_iters)
			max_iters = iters;
	}
	b.send = xmalloc(max_bytes * (size_t)nranks);
	b.recv = xmalloc(max_bytes * (size_t)nranks);
	int64_t *mine = xmalloc(2 * (size_t)max_iters * sizeof(int64_t));
	int64_t *all = rank == 0 ? xmalloc(2 * (size_t)max_iters * (size_t)nranks * sizeof(int64_t)) : NULL;

	for (size_t ci = 0; ci < ncells; ci++) {
		const struct cell *c = &cells[ci];
		long long warmup, iters;
		uint64_t window = 0;
		cell_counts(&o, c, &warmup, &iters);
		if (o.method == METHOD_OSU)
			run_series_osu(c, &b, warmup, iters, mine, mine + iters);
		else
			window = run_series(&o, c, &b, iters, mine, mine + iters);
		check_mpi(MPI_Gather(mine, (int)(2 * iters), MPI_INT64_T, all, (int)(2 * iters), MPI_INT64_T, 0,
				     MPI_COMM_WORLD), "MPI_Gather");
		if (rank != 0)
			continue;
		for (int r = 0; r < nranks; r++) {
			if (c->bench == B_PINGPONG && r != 0 && r != nranks - 1)
				continue; /* idle during ping-pong */
			const int64_t *t = all + (size_t)r * 2 * (size_t)iters;
			for (long long i = 0; i < iters; i++)
				raw_printf(&out, "%s,%lld,%d,%d,%lld,%d,%lld,%lld,%llu\n",
					   (o.method == METHOD_OSU ? osu_names : bench_names)[c->bench], c->bytes,
					   nranks, c->series, i, r, (long long)t[i], (long long)t[iters + i],
					   (unsigned long long)window);
		}
		/* Each cell reaches the file before the next starts: a rank lost
		 * later leaves whole cells behind. */
		if (raw_flush(&out) != 0) {
			raw_close(&out, prog);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
	}
	if (rank == 0 && raw_close(&out, prog) != 0)
		MPI_Abort(MPI_COMM_WORLD, 1);
	free(all);
	free(mine);
	free(b.send);
	free(b.recv);
	free(cells);
	free(procs);
	free(o.sizes.v);
	MPI_Finalize();
	return 0;
}
