/* mpi-pingpong-ref: the minimal reference ping-pong, timed the OSU way: after
 * warm-up, rank 0 times the whole loop of blocking MPI_Send/MPI_Recv round
 * trips and reports loop time / (2 x iterations). No per-iteration barrier,
 * no validation: it is the yardstick mpi-probe's ping-pong is checked
 * against, so it stays as plain as osu_latency. */
#include <mpi.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cli.h"
#include "../common/lists.h"

int main(int argc, char **argv)
{
	const char *prog = "mpi-pingpong-ref";
	struct int_list sizes = {0};
	long long iterations = 1000, warmup = 100, series = 1;
	int rank, nranks;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help")) {
			printf("usage: mpirun -np 2 mpi-pingpong-ref [--sizes LIST] [--iterations N] [--warmup N]\n"
			       "                   [--series K]\n"
			       "OSU-style latency: one timed loop per size, latency = time / (2 N);\n"
			       "the list of sizes is run K times (default 1).\n"
			       "Prints CSV: series,bytes,iterations,latency_ns (rank 0).\n");
			return 0;
		} else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
			sizes = parse_int_list(prog, "--sizes", argv[++i], 1, 1 << 30);
		else if (!strcmp(argv[i], "--iterations") && i + 1 < argc)
			iterations = parse_int_flag(prog, "--iterations", argv[++i], 1, 1000000000);
		else if (!strcmp(argv[i], "--series") && i + 1 < argc)
			series = parse_int_flag(prog, "--series", argv[++i], 1, 1000000);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc)
			warmup = parse_int_flag(prog, "--warmup", argv[++i], 0, 1000000000);
		else {
			fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", prog, argv[i]);
			return 2;
		}
	}
	if (!sizes.n) {
		static long long one = 1;
		sizes.v = &one;
		sizes.n = 1;
	}
	if (MPI_Init(&argc, &argv) != MPI_SUCCESS)
		return 1;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (nranks != 2) {
		if (rank == 0)
			fprintf(stderr, "%s: run with exactly 2 ranks (mpirun -np 2)\n", prog);
		MPI_Finalize();
		return 2;
	}
	if (rank == 0)
		printf("series,bytes,iterations,latency_ns\n");
	for (size_t k = 0; k < sizes.n * (size_t)series; k++) {
		int m = (int)sizes.v[k % sizes.n];
		char *buf = malloc((size_t)m);
		double t0 = 0.0;
		if (!buf) {
			fprintf(stderr, "%s: out of memory\n", prog);
			MPI_Abort(MPI_COMM_WORLD, 1);
		}
		memset(buf, 'a', (size_t)m);
		MPI_Barrier(MPI_COMM_WORLD);
		for (long long i = 0; i < warmup + iterations; i++) {
			if (i == warmup)
				t0 = MPI_Wtime();
			if (rank == 0) {
				MPI_Send(buf, m, MPI_CHAR, 1, 1, MPI_COMM_WORLD);
				MPI_Recv(buf, m, MPI_CHAR, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
			} else {
				MPI_Recv(buf, m, MPI_CHAR, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
				MPI_Send(buf, m, MPI_CHAR, 0, 1, MPI_COMM_WORLD);
			}
		}
		if (rank == 0)
			printf("%zu,%d,%lld,%.1f\n", k / sizes.n, m, iterations, (MPI_Wtime() - t0) * 1e9 / (2.0 * (double)iterations));
		free(buf);
	}
	MPI_Finalize();
	return 0;
}
