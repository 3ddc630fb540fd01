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

static const char *prog = "mpi-probe";

enum bench { B_PINGPONG, B_BCAST, B_ALLREDUCE, B_ALLTOALL, B_BARRIER, B_COUNT };
static const char *const bench_names[B_COUNT] = {"pingpong", "bcast", "allreduce", "alltoall", "barrier"};
/* The coll_tuned parameter naming each benchmark's algorithm (none for ping-pong). */
static const char *const bench_cvar[B_COUNT] = {NULL, "coll_tuned_bcast_algorithm",
	"coll_tuned_allreduce_algorithm", "coll_tuned_alltoall_algorithm", "coll_tuned_barrier_algorithm"};

/* Under --method osu, rows carry the name of the OSU program reproduced. */
static const char *const osu_names[B_COUNT] = {"osu_latency", "osu_bcast", "osu_allreduce", "osu_alltoall",
	"osu_barrier"};

enum sync_mode { SYNC_BARRIER, SYNC_WINDOW };
static const char *const sync_names[] = {"barrier", "window"};

enum method { METHOD_PROBE, METHOD_OSU };
static const char *const method_names[] = {"probe", "osu"};

/* OSU 5.3's counts: osu_coll.h (SKIP, SKIP_LARGE, 1000/100 iterations) and
 * osu_pt2pt.h (LAT_SKIP_*, LAT_LOOP_*); "large" is above 8192, counted in
 * elements (floats for allreduce). */
#define OSU_LARGE 8192
static const long long osu_coll_counts[4] = {200, 1000, 10, 100}; /* skip, iters; large */
static const long long osu_lat_counts[4] = {100, 10000, 10, 1000};

struct options {
	unsigned benches;
	struct int_list sizes;
	long long warmup, iterations, series;
	long long large_bytes, large_iterations;
	enum sync_mode sync;
	long long window_us; /* 0: derived from the warm-up */
	long long seed;
	long long inject_rank; /* -1: off */
	long long delay_rank;  /* -1: off */
	long long delay_us;
	enum method method;
	/* Which counts were given on the command line (they override OSU's). */
	int set_warmup, set_iterations, set_large_iterations;
	const char *output;
};

struct cell {
	int bench;
	long long bytes;
	int series;
};

static int rank, nranks;
static int lie; /* this rank was told to perturb its input (--inject-error) */
static int osu; /* --method osu: allreduce sums floats, as osu_allreduce does */
static uint64_t delay_ns; /* --delay-us on this rank; 0 elsewhere */

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

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "%s: rank %d: out of memory allocating %zu bytes\n", prog, rank, n);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

static void check_mpi(int err, const char *what)
{
	if (err != MPI_SUCCESS) {
		char text[MPI_MAX_ERROR_STRING];
		int len = 0;
		MPI_Error_string(err, text, &len);
		fprintf(stderr, "%s: rank %d: %s failed: %s\n", prog, rank, what, text);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
}

/* The byte every validator expects: a function of who wrote it, for whom,
 * where, and in which iteration, so stale or misrouted data cannot pass. */
static inline uint8_t pattern(long long iter, int src, int dst, size_t i)
{
	return (uint8_t)(iter * 131 + src * 31 + dst * 17 + (long long)i * 7 + 1);
}

struct buffers {
	uint8_t *send, *recv;
	size_t bytes; /* per destination */
};

static void fill(int bench, struct buffers *b, long long iter)
{
	size_t m = b->bytes;

	switch (bench) {
	case B_PINGPONG:
	case B_BCAST:
		for (size_t i = 0; i < m; i++)
			b->send[i] = pattern(iter, 0, 0, i);
		memset(b->recv, 0xa5, m);
		if (lie && rank == 0)
			b->send[m / 2] ^= 0x40; /* the root sends a corrupted copy */
		break;
	case B_ALLREDUCE:
		if (osu) {
			/* Small whole numbers: their float sum is exact. */
			float *f = (float *)b->send;
			for (size_t i = 0; i < m / sizeof(float); i++)
				f[i] = (float)pattern(iter, rank, 0, i);
			if (lie)
				f[m / sizeof(float) / 2] += 1.0f;
		} else {
			for (size_t i = 0; i < m; i++)
				b->send[i] = pattern(iter, rank, 0, i);
			if (lie)
				b->send[m / 2] ^= 0x40;
		}
		memset(b->recv, 0xa5, m);
		break;
	case B_ALLTOALL:
		for (int d = 0; d < nranks; d++)
			for (size_t i = 0; i < m; i++)
				b->send[(size_t)d * m + i] = pattern(iter, rank, d, i);
		memset(b->recv, 0xa5, m * (size_t)nranks);
		if (lie)
			b->send[((size_t)(rank + 1) % (size_t)nranks) * m + m / 2] ^= 0x40;
		break;
	default:
		break;
	}
}

static void invalid(int bench, size_t bytes, int series, long long iter, size_t at, unsigned got,
		    unsigned want)
{
	fprintf(stderr, "%s: validation failed: %s %zu B, series %d iteration %lld: rank %d has 0x%02x at byte %zu, expected 0x%02x\n",
		prog, bench_names[bench], bytes, series, iter, rank, got, at, want);
	fflush(stderr);
	MPI_Abort(MPI_COMM_WORLD, 3);
}

static void validate(int bench, const struct buffers *b, int series, long long iter)
{
	size_t m = b->bytes;
	int peer = nranks - 1;

	switch (bench) {
	case B_PINGPONG:
		if (rank != 0 && rank != peer)
			return;
		/* Rank 0 gets its message back; the peer got rank 0's message. */
		for (size_t i = 0; i < m; i++)
			if (b->recv[i] != pattern(iter, 0, 0, i))
				invalid(bench, m, series, iter, i, b->recv[i], pattern(iter, 0, 0, i));
		return;
	case B_BCAST: {
		const uint8_t *got = rank == 0 ? b->send : b->recv;
		if (rank == 0)
			return;
		for (size_t i = 0; i < m; i++)
			if (got[i] != pattern(iter, 0, 0, i))
				invalid(bench, m, series, iter, i, got[i], pattern(iter, 0, 0, i));
		return;
	}
	case B_ALLREDUCE:
		if (osu) {
			const float *f = (const float *)b->recv;
			for (size_t i = 0; i < m / sizeof(float); i++) {
				float want = 0;
				for (int r = 0; r < nranks; r++)
					want += (float)pattern(iter, r, 0, i);
				if (f[i] != want) {
					fprintf(stderr, "%s: validation failed: allreduce %zu B, series %d iteration %lld: rank %d has %g in element %zu, expected %g\n",
						prog, m, series, iter, rank, (double)f[i], i, (double)want);
					fflush(stderr);
					MPI_Abort(MPI_COMM_WORLD, 3);
				}
			}
			return;
		}
		for (size_t i = 0; i < m; i++) {
			uint8_t want = 0;
			for (int r = 0; r < nranks; r++)
				want ^= pattern(iter, r, 0, i);
			if (b->recv[i] != want)
				invalid(bench, m, series, iter, i, b->recv[i], want);
		}
		return;
	case B_ALLTOALL:
		for (int s = 0; s < nranks; s++)
			for (size_t i = 0; i < m; i++) {
				uint8_t want = pattern(iter, s, rank, i);
				uint8_t got = b->recv[(size_t)s * m + i];
				if (got != want)
					invalid(bench, m, series, iter, (size_t)s * m + i, got, want);
			}
		return;
	default:
		return;
	}
}

/* One timed round trip; returns this rank's elapsed time. The peer posts its
 * receive and then says "ready", and rank 0 starts the clock only after
 * hearing it: the peer never lags behind (it may still be checking the last
 * iteration's 1 MiB otherwise), and no barrier's exit skew is counted, as in
 * osu_latency's steady loop. */
static uint64_t pingpong_round(struct buffers *b)
{
	int peer = nranks - 1, m = (int)b->bytes;
	uint64_t t0 = 0;
	char ready = 0;
	MPI_Request req;

	if (rank == 0) {
		check_mpi(MPI_Recv(&ready, 0, MPI_CHAR, peer, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
		t0 = now_ns();
		check_mpi(MPI_Send(b->send, m, MPI_BYTE, peer, 1, MPI_COMM_WORLD), "MPI_Send");
		check_mpi(MPI_Recv(b->recv, m, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
	} else if (rank == peer) {
		t0 = now_ns();
		check_mpi(MPI_Irecv(b->recv, m, MPI_BYTE, 0, 1, MPI_COMM_WORLD, &req), "MPI_Irecv");
		check_mpi(MPI_Send(&ready, 0, MPI_CHAR, 0, 3, MPI_COMM_WORLD), "MPI_Send");
		check_mpi(MPI_Wait(&req, MPI_STATUS_IGNORE), "MPI_Wait");
		if (lie)
			b->recv[m / 2] ^= 0x40; /* --inject-error: echo a corrupted copy */
		check_mpi(MPI_Send(b->recv, m, MPI_BYTE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
	}
	return rank == 0 || rank == peer ? now_ns() - t0 : 0;
}

static void run_once(int bench, struct buffers *b)
{
	int m = (int)b->bytes;

	switch (bench) {
	case B_PINGPONG:
		/* Timed by pingpong_round() instead. */
		return;
	case B_BCAST:
		check_mpi(MPI_Bcast(rank == 0 ? b->send : b->recv, m, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast");
		return;
	case B_ALLREDUCE:
		if (osu) {
			check_mpi(MPI_Allreduce(b->send, b->recv, m / (int)sizeof(float), MPI_FLOAT, MPI_SUM,
						MPI_COMM_WORLD), "MPI_Allreduce");
			return;
		}
		/* Bytewise XOR: exact at every size from 1 B. MPI_SUM on bytes is
		 * not: Open MPI 4.1's op/avx saturates integer sums that overflow
		 * (open-mpi/ompi#8045, "wontfix"), which this probe's validation
		 * caught on its first run. */
		check_mpi(MPI_Allreduce(b->send, b->recv, m, MPI_UINT8_T, MPI_BXOR, MPI_COMM_WORLD), "MPI_Allreduce");
		return;
	case B_ALLTOALL:
		check_mpi(MPI_Alltoall(b->send, m, MPI_BYTE, b->recv, m, MPI_BYTE, MPI_COMM_WORLD), "MPI_Alltoall");
		return;
	case B_BARRIER:
		check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		return;
	default:
		return;
	}
}

/* Busy-waits `ns` (--delay-us): a known delay inside the timed region. */
static void spin(uint64_t ns)
{
	if (!ns)
		return;
	uint64_t until = now_ns() + ns;
	while (now_ns() < until)
		;
}

/* ---- window synchronisation ------------------------------------------- */

/* Offset of this rank's clock to rank 0's: global = local + offset. From the
 * exchange with the smallest round trip out of `rounds` (as SKaMPI/ReproMPI). */
static int64_t clock_offset_ns(int rounds)
{
	int64_t offset = 0;

	for (int r = 1; r < nranks; r++) {
		uint64_t best = UINT64_MAX;
		for (int k = 0; k < rounds; k++) {
			uint64_t t_root = 0;
			if (rank == 0) {
				check_mpi(MPI_Recv(&t_root, 1, MPI_UINT64_T, r, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
				t_root = now_ns();
				check_mpi(MPI_Send(&t_root, 1, MPI_UINT64_T, r, 2, MPI_COMM_WORLD), "MPI_Send");
			} else if (rank == r) {
				uint64_t t1 = now_ns();
				check_mpi(MPI_Send(&t1, 1, MPI_UINT64_T, 0, 2, MPI_COMM_WORLD), "MPI_Send");
				check_mpi(MPI_Recv(&t_root, 1, MPI_UINT64_T, 0, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
				uint64_t t2 = now_ns();
				if (t2 - t1 < best) {
					best = t2 - t1;
					offset = (int64_t)t_root - (int64_t)(t1 + (t2 - t1) / 2);
				}
			}
		}
	}
	return offset;
}

/* Wait until the global clock reaches `target`; returns 1 if it had already
 * passed (the iteration starts late and is marked so). Yields while far off,
 * so an oversubscribed rank does not starve the others. */
static int wait_until(uint64_t target, int64_t offset)
{
	uint64_t t = now_ns() + (uint64_t)offset;
	if (t > target)
		return 1;
	while (t < target) {
		if (target - t > 50000)
			sched_yield();
		t = now_ns() + (uint64_t)offset;
	}
	return 0;
}

/* ---- what ran: library and coll_tuned algorithm ------------------------ */

/* Reads an integer MCA parameter through MPI_T. Returns 0 and fills *value
 * and, for enumerations, `label`; -1 when the parameter does not exist (not
 * Open MPI, or its tuned component is not loaded). */
static int read_cvar(const char *name, int *value, char *label, size_t label_len)
{
	int idx, verbosity, bind, scope, name_len = 0, desc_len = 0, count;
	MPI_Datatype type;
	MPI_T_enum enumtype;
	MPI_T_cvar_handle handle;

	label[0] = '\0';
	if (MPI_T_cvar_get_index(name, &idx) != MPI_SUCCESS)
		return -1;
	if (MPI_T_cvar_get_info(idx, NULL, &name_len, &verbosity, &type, &enumtype, NULL, &desc_len,
				&bind, &scope) != MPI_SUCCESS || (type != MPI_INT && type != MPI_C_BOOL))
		return -1;
	if (MPI_T_cvar_handle_alloc(idx, NULL, &handle, &count) != MPI_SUCCESS || count != 1)
		return -1;
	/* Booleans (use_dynamic_rules) are C bools, not ints. */
	union {
		int i;
		_Bool b;
	} buf = {0};
	int rc = MPI_T_cvar_read(handle, &buf);
	MPI_T_cvar_handle_free(&handle);
	if (rc != MPI_SUCCESS)
		return -1;
	*value = type == MPI_C_BOOL ? (int)buf.b : buf.i;
	if (enumtype != MPI_T_ENUM_NULL) {
		int items = 0, len = (int)label_len;
		char ename[256];
		int elen = sizeof(ename);
		if (MPI_T_enum_get_info(enumtype, &items, ename, &elen) == MPI_SUCCESS) {
			for (int i = 0; i < items; i++) {
				int v;
				len = (int)label_len;
				if (MPI_T_enum_get_item(enumtype, i, &v, label, &len) == MPI_SUCCESS && v == *value)
					return 0;
			}
		}
		label[0] = '\0';
	}
	return 0;
}

static void write_meta(struct raw_out *f, const struct options *o, char (*procs)[MPI_MAX_PROCESSOR_NAME])
{
	char library[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0, provided, dynamic = 0, have_dynamic;
	char label[128];

	MPI_Get_library_version(library, &len);
	if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
		fprintf(stderr, "%s: MPI_T_init_thread failed; cannot record the collective algorithms\n", prog);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	have_dynamic = read_cvar("coll_tuned_use_dynamic_rules", &dynamic, label, sizeof(label)) == 0;

	raw_printf(f, "# meta: {\"probe\": \"mpi-probe\", \"format\": 1, \"ranks\": %d, \"library\": ", nranks);
	raw_json_string(f, library);
	raw_printf(f, ", \"processors\": [");
	for (int r = 0; r < nranks; r++) {
		raw_printf(f, r ? ", " : "");
		raw_json_string(f, procs[r]);
	}
	raw_printf(f, "], \"sync\": \"%s\", \"warmup\": %lld, \"iterations\": %lld, \"series\": %lld, "
		"\"large_bytes\": %lld, \"large_iterations\": %lld, \"seed\": %lld, \"timer\": \"CLOCK_MONOTONIC\", "
		"\"pingpong_ns\": \"round trip on rank 0, timed after the peer's ready message (no barrier or window); the peer's own time from posting its receive to sending the echo\", ",
		sync_names[o->sync], o->warmup, o->iterations, o->series, o->large_bytes,
		o->large_iterations, o->seed);
	raw_printf(f, "\"method\": \"%s\", ", method_names[o->method]);
	if (o->method == METHOD_OSU)
		raw_printf(f, "\"osu\": {\"modelled_on\": \"OSU micro-benchmarks 5.3\", \"large_above_elements\": %d, "
			"\"collective\": {\"skip\": %lld, \"iterations\": %lld, \"skip_large\": %lld, \"iterations_large\": %lld}, "
			"\"latency\": {\"skip\": %lld, \"iterations\": %lld, \"skip_large\": %lld, \"iterations_large\": %lld}, "
			"\"counts_from_command_line\": %s, \"allreduce_op\": \"MPI_SUM on MPI_FLOAT\", "
			"\"ns\": \"osu_latency rows: one round trip (back to back); collective rows: the operation, barrier after\"}, ",
			OSU_LARGE, osu_coll_counts[0], osu_coll_counts[1], osu_coll_counts[2], osu_coll_counts[3],
			osu_lat_counts[0], osu_lat_counts[1], osu_lat_counts[2], osu_lat_counts[3],
			o->set_warmup || o->set_iterations || o->set_large_iterations ? "true" : "false");
	raw_printf(f, "\"validated\": true, \"inject_error_rank\": %lld, \"delay_rank\": %lld, \"delay_us\": %lld, "
		"\"coll_tuned_use_dynamic_rules\": ",
		o->inject_rank, o->delay_rank, o->delay_us);
	if (have_dynamic)
		raw_printf(f, "%d", dynamic);
	else
		raw_printf(f, "null");
	raw_printf(f, ", \"algorithms\": {");
	int first = 1;
	for (int b = 0; b < B_COUNT; b++) {
		int value = 0;
		if (!bench_cvar[b] || !(o->benches & (1u << b)))
			continue;
		raw_printf(f, "%s\"%s\": ", first ? "" : ", ", bench_names[b]);
		first = 0;
		if (read_cvar(bench_cvar[b], &value, label, sizeof(label)) != 0)
			raw_printf(f, "{\"pinned\": false, \"algorithm\": \"unknown: no coll_tuned parameter\"}");
		else if (have_dynamic && dynamic && value != 0) {
			raw_printf(f, "{\"pinned\": true, \"value\": %d, \"algorithm\": ", value);
			raw_json_string(f, label[0] ? label : "unnamed");
			raw_printf(f, "}");
		} else
			raw_printf(f, "{\"pinned\": false, \"value\": %d, \"algorithm\": \"tuned fixed decision rules\"}", value);
	}
	raw_printf(f, "}}\n");
	MPI_T_finalize();
}

static long long tick; /* distinct pattern per iteration, warm-up included */

/* ---- --method osu ------------------------------------------------------- */

/* Warm-up and timed iterations of one cell. Under --method osu, OSU's counts
 * unless the command line set them (-x/-i in OSU set both sizes alike). */
static void cell_counts(const struct options *o, const struct cell *c, long long *warmup, long long *iters)
{
	if (o->method != METHOD_OSU) {
		*warmup = o->warmup;
		*iters = c->bytes > o->large_bytes ? o->large_iterations : o->iterations;
		return;
	}
	const long long *k = c->bench == B_PINGPONG ? osu_lat_counts : osu_coll_counts;
	long long elements = c->bench == B_ALLREDUCE ? c->bytes / (long long)sizeof(float) : c->bytes;
	int large = elements > OSU_LARGE;
	*warmup = o->set_warmup ? o->warmup : k[large ? 2 : 0];
	if (large && o->set_large_iterations)
		*iters = o->large_iterations;
	else
		*iters = o->set_iterations ? o->iterations : k[large ? 3 : 1];
}

/* One untimed, checked operation: a warm-up iteration of ours, and under
 * --method osu the check OSU never makes, so a wrong result still stops the
 * run. */
static void checked_pass(const struct cell *c, struct buffers *b, long long it)
{
	fill(c->bench, b, it);
	if (c->bench == B_PINGPONG)
		pingpong_round(b);
	else {
		check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		run_once(c->bench, b);
	}
	validate(c->bench, b, c->series, it);
}

/* One series as an OSU program times one message size. The buffers of the
 * checked pass are reused as they are; the same check after the loop shows
 * the timed operations delivered the same result. */
static void run_series_osu(const struct cell *c, struct buffers *b, long long warmup, long long iters,
			   int64_t *times, int64_t *late)
{
	int peer = nranks - 1, m = (int)c->bytes;
	long long it = tick++;

	b->bytes = (size_t)c->bytes;
	checked_pass(c, b, it);
	memset(late, 0, (size_t)iters * sizeof(*late));
	check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
	if (c->bench == B_PINGPONG) {
		/* osu_latency: back-to-back round trips; one clock reading per
		 * iteration, so the times add up to OSU's loop time. */
		uint64_t prev = now_ns();
		for (long long i = 0; i < warmup + iters; i++) {
			if (rank == 0) {
				check_mpi(MPI_Send(b->send, m, MPI_BYTE, peer, 1, MPI_COMM_WORLD), "MPI_Send");
				check_mpi(MPI_Recv(b->recv, m, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
					  "MPI_Recv");
			} else if (rank == peer) {
				check_mpi(MPI_Recv(b->recv, m, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
					  "MPI_Recv");
				check_mpi(MPI_Send(b->recv, m, MPI_BYTE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
			}
			uint64_t t = now_ns();
			if (i >= warmup)
				times[i - warmup] = rank == 0 || rank == peer ? (int64_t)(t - prev) : 0;
			prev = t;
		}
	} else {
		for (long long i = 0; i < warmup + iters; i++) {
			uint64_t t0 = now_ns();
			spin(delay_ns);
			run_once(c->bench, b);
			uint64_t t1 = now_ns();
			if (i >= warmup)
				times[i - warmup] = (int64_t)(t1 - t0);
			check_mpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
		}
	}
	validate(c->bench, b, c->series, it);
}

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
