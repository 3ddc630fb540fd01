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

/* After getopt: exit 2 with one line if arguments are left over, or if a
 * required flag (present == 0) is missing. */
void reject_extra_args(const char *prog, int optind_now, int argc, char **argv);
void require_flag(const char *prog, int present, const char *flag);

/* Pin the calling thread to one CPU; exits with a one-line reason on error. */
void pin_to_cpu(const char *prog, int cpu);

#endif
