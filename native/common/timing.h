/* Monotonic timing helpers shared by the probes. */
#ifndef IOLAB_TIMING_H
#define IOLAB_TIMING_H

#include <stdint.h>
#include <time.h>

/* Nanoseconds on CLOCK_MONOTONIC. Aborts the program if the clock fails,
 * because every measurement after that would be meaningless. */
uint64_t now_ns(void);

/* Median cost of one back-to-back now_ns() pair, from `samples` pairs. */
double timer_overhead_ns(int samples);

#endif
