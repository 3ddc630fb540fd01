/* Comma-separated list flags ("1,2,4", "tcp,unix") with strict checking. */
#ifndef IOLAB_LISTS_H
#define IOLAB_LISTS_H

#include <stddef.h>

struct int_list {
	long long *v;
	size_t n;
};

/* Parse "a,b,c" of integers in [min, max]; exits 2 with one line on error. */
struct int_list parse_int_list(const char *prog, const char *flag, const char *text,
			       long long min, long long max);

/* Parse "x,y" where each item must be one of names[0..count); returns a
 * bitmask of the chosen indices. Exits 2 with one line on error. */
unsigned parse_name_set(const char *prog, const char *flag, const char *text,
			const char *const *names, size_t count);

#endif
