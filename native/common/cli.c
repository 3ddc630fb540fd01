#define _GNU_SOURCE
#include "cli.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

long long parse_int_flag(const char *prog, const char *flag, const char *text,
			 long long min, long long max)
{
	char *end = NULL;
	long long v;

	if (!text || !*text) {
		fprintf(stderr, "%s: %s: missing value\n", prog, flag);
		exit(2);
	}
	errno = 0;
	v = strtoll(text, &end, 10);
	if (errno || *end) {
		fprintf(stderr, "%s: %s: '%s' is not an integer\n", prog, flag, text);
		exit(2);
	}
	if (v < min || v > max) {
		fprintf(stderr, "%s: %s: %lld is out of range [%lld, %lld]\n",
			prog, flag, v, min, max);
		exit(2);
	}
	return v;
}

double parse_seconds_flag(const char *prog, const char *flag, const char *text)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(text ? text : "", &end);
	if (!text || !*text || errno || *end || !(v >= 0.0) || v > 1e9) {
		fprintf(stderr, "%s: %s: '%s' is not a non-negative number\n", prog, flag, text ? text : "");
		exit(2);
	}
	return v;
}

void reject_extra_args(const char *prog, int optind_now, int argc, char **argv)
{
	if (optind_now < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'; see --help\n", prog, argv[optind_now]);
		exit(2);
	}
}

void require_flag(const char *prog, int present, const char *flag)
{
	if (!present) {
		fprintf(stderr, "%s: %s is required; see --help\n", prog, flag);
		exit(2);
	}
}

void pin_to_cpu(const char *prog, int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof(set), &set) != 0) {
		fprintf(stderr, "%s: --cpu %d: cannot pin: %s\n", prog, cpu,
			strerror(errno));
		exit(2);
	}
}
