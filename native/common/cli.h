/* Small, strict command-line value parsing shared by the native programs. */
#ifndef IOLAB_CLI_H
#define IOLAB_CLI_H

#include <stdint.h>

/* Parse a base-10 integer in [min, max]. On failure prints one line
 * "PROG: --FLAG: ..." to stderr and exits with status 2. */
long long parse_int_flag(const char *prog, const char *flag, const char *text,
			 long long min, long long max);

/* Parse a non-negative decimal number (seconds, rates); exits 2 with one
 * line "PROG: --FLAG: ..." on failure. */
double parse_seconds_flag(const char *prog, const char *flag, const char *text);

/* Pin the calling thread to one CPU; exits with a one-line reason on error. */
void pin_to_cpu(const char *prog, int cpu);

#endif
