/* mpi-probe's operations: the buffers each benchmark fills and checks
 * (every byte a function of writer, reader, position and iteration), one
 * timed ping-pong round trip, one collective, and the known delay of
 * --delay-us. */
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

void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "%s: rank %d: out of memory allocating %zu bytes\n", prog, rank, n);
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	return p;
}

void check_mpi(int err, const char *what)
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

void fill(int bench, struct buffers *b, long long iter)
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

void validate(int bench, const struct buffers *b, int series, long long iter)
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
uint64_t pingpong_round(struct buffers *b)
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

void run_once(int bench, struct buffers *b)
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
void spin(uint64_t ns)
{
	if (!ns)
		return;
	uint64_t until = now_ns() + ns;
	while (now_ns() < until)
		;
}
