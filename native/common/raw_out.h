/* Writing a raw-data file (a cost-probe CSV, an mpi-probe table, a loadgen
 * histogram). The first failed write is remembered and later writes are
 * skipped, so a writer checks once, at a flush or the close, and reports
 * one line naming the file, instead of testing every fprintf. */
#ifndef IOLAB_RAW_OUT_H
#define IOLAB_RAW_OUT_H

#include <stdio.h>

struct raw_out {
	FILE *f;
	const char *name; /* the path, or "standard output", for messages */
	int err;          /* errno of the first failure, 0 while all is well */
};

/* Opens `path` for writing, or standard output when path is NULL.
 * Returns 0, or -1 with o->err set. */
int raw_open(struct raw_out *o, const char *path);

/* fprintf to the file. Returns 0, or -1 once any write has failed. */
int raw_printf(struct raw_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A JSON string literal: quotes, backslashes and control bytes escaped. */
int raw_json_string(struct raw_out *o, const char *s);

/* Pushes buffered lines to the file, so rows measured so far survive a
 * later crash. Returns 0, or -1 if this or any earlier write failed. */
int raw_flush(struct raw_out *o);

/* Flushes and closes (standard output is flushed, not closed). Returns 0,
 * or -1 after printing "<prog>: writing <name>: <reason>" to stderr. */
int raw_close(struct raw_out *o, const char *prog);

#endif
