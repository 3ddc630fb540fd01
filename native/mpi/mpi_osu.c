/* --method osu: timing as the OSU micro-benchmarks 5.3 do (osu_latency's
 * back-to-back loop; collectives with a barrier after each), with OSU's
 * skip and iteration counts by size, and a checked pass before and after
 * so a wrong result still stops the run. */
#define _GNU_SOURCE
#include <mpi.h>

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/raw_out.h"
#include "../common/timing.h"
#include "mpi_probe.h"

/* Warm-up and timed iterations of one cell. Under --method osu, OSU's counts
 * unless the command line set them (-x/-i in OSU set both sizes alike). */
void cell_counts(const struct options *o, const struct cell *c, long long *warmup, long long *iters)
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
void checked_pass(const struct cell *c, struct buffers *b, long long it)
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
void run_series_osu(const struct cell *c, struct buffers *b, long long warmup, long long iters,
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
