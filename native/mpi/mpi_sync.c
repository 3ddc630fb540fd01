/* mpi-probe's window synchronisation (--sync window, as SKaMPI and
 * ReproMPI do): each rank's clock offset to rank 0's, and waiting for a
 * common start instant. */
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

/* Offset of this rank's clock to rank 0's: global = local + offset. From the
 * exchange with the smallest round trip out of `rounds` (as SKaMPI/ReproMPI). */
int64_t clock_offset_ns(int rounds)
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
int wait_until(uint64_t target, int64_t offset)
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
