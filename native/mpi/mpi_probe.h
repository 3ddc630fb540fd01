/* mpi-probe's shared declarations: the benchmarks, the options, a cell of
 * the run, the buffers, the run's state, and the functions its files share
 * (mpi_probe.c: the command line and the run; mpi_ops.c: the operations and
 * their checks; mpi_sync.c: window synchronisation; mpi_osu.c: the OSU
 * method; mpi_meta.c: what ran). */
#ifndef IOLAB_MPI_PROBE_H
#define IOLAB_MPI_PROBE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/lists.h"
#include "../common/raw_out.h"

enum bench { B_PINGPONG, B_BCAST, B_ALLREDUCE, B_ALLTOALL, B_BARRIER, B_COUNT };
enum sync_mode { SYNC_BARRIER, SYNC_WINDOW };
enum method { METHOD_PROBE, METHOD_OSU };

extern const char *prog;
extern const char *const bench_names[B_COUNT];
/* The coll_tuned parameter naming each benchmark's algorithm (none for ping-pong). */
extern const char *const bench_cvar[B_COUNT];
/* Under --method osu, rows carry the name of the OSU program reproduced. */
extern const char *const osu_names[B_COUNT];
extern const char *const sync_names[2];
extern const char *const method_names[2];

/* OSU 5.3's counts: osu_coll.h (SKIP, SKIP_LARGE, 1000/100 iterations) and
 * osu_pt2pt.h (LAT_SKIP_*, LAT_LOOP_*); "large" is above 8192, counted in
 * elements (floats for allreduce). */
#define OSU_LARGE 8192
extern const long long osu_coll_counts[4]; /* skip, iters; large */
extern const long long osu_lat_counts[4];

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

struct buffers {
	uint8_t *send, *recv;
	size_t bytes; /* per destination */
};

extern int rank, nranks;
extern int lie;            /* this rank was told to perturb its input (--inject-error) */
extern int osu;            /* --method osu: allreduce sums floats, as osu_allreduce does */
extern uint64_t delay_ns;  /* --delay-us on this rank; 0 elsewhere */
extern long long tick;     /* distinct pattern per iteration, warm-up included */

/* mpi_ops.c */
void *xmalloc(size_t n);
void check_mpi(int err, const char *what);
void fill(int bench, struct buffers *b, long long iter);
void validate(int bench, const struct buffers *b, int series, long long iter);
uint64_t pingpong_round(struct buffers *b);
void run_once(int bench, struct buffers *b);
void spin(uint64_t ns);
/* mpi_sync.c */
int64_t clock_offset_ns(int rounds);
int wait_until(uint64_t target, int64_t offset);
/* mpi_meta.c */
void write_meta(struct raw_out *f, const struct options *o, char (*procs)[MPI_MAX_PROCESSOR_NAME]);
/* mpi_osu.c */
void cell_counts(const struct options *o, const struct cell *c, long long *warmup, long long *iters);
void checked_pass(const struct cell *c, struct buffers *b, long long it);
void run_series_osu(const struct cell *c, struct buffers *b, long long warmup, long long iters,
		    int64_t *times, int64_t *late);

#endif
