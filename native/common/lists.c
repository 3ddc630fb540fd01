#define _GNU_SOURCE
#include "lists.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

struct int_list parse_int_list(const char *prog, const char *flag, const char *text,
			       long long min, long long max)
{
	struct int_list l = { NULL, 0 };
	char *copy = strdup(text ? text : ""), *save = NULL, *tok;
	size_t cap = 0;

	if (!copy) {
		perror("strdup");
		exit(2);
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (l.n == cap) {
			cap = cap ? cap * 2 : 8;
			l.v = realloc(l.v, cap * sizeof(*l.v));
			if (!l.v) {
				perror("realloc");
				exit(2);
			}
		}
		l.v[l.n++] = parse_int_flag(prog, flag, tok, min, max);
	}
	free(copy);
	if (l.n == 0) {
		fprintf(stderr, "%s: %s: empty list\n", prog, flag);
		exit(2);
	}
	return l;
}

unsigned parse_name_set(const char *prog, const char *flag, const char *text,
			const char *const *names, size_t count)
{
	char *copy = strdup(text ? text : ""), *save = NULL, *tok;
	unsigned mask = 0;

	if (!copy) {
		perror("strdup");
		exit(2);
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < count; i++)
			if (strcmp(tok, names[i]) == 0)
				break;
		if (i == count) {
			fprintf(stderr, "%s: %s: unknown value '%s' (known:", prog, flag, tok);
			for (size_t j = 0; j < count; j++)
				fprintf(stderr, "%s%s", j ? "," : " ", names[j]);
			fprintf(stderr, ")\n");
			free(copy);
			exit(2);
		}
		mask |= 1u << i;
	}
	free(copy);
	if (!mask) {
		fprintf(stderr, "%s: %s: empty list\n", prog, flag);
		exit(2);
	}
	return mask;
}
