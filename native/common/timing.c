#define _GNU_SOURCE
#include "timing.h"

#include <stdio.h>
#include <stdlib.h>

uint64_t now_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) {
		perror("clock_gettime(CLOCK_MONOTONIC)");
		abort();
	}
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

double timer_overhead_ns(int samples)
{
	uint64_t *d;
	double median;

	if (samples < 1)
		samples = 1;
	d = malloc((size_t)samples * sizeof(*d));
	if (!d) {
		perror("malloc");
		exit(2);
	}
	for (int i = 0; i < samples; i++) {
		uint64_t a = now_ns();
		uint64_t b = now_ns();
		d[i] = b - a;
	}
	qsort(d, (size_t)samples, sizeof(*d), cmp_u64);
	median = (double)d[samples / 2];
	free(d);
	return median;
}
