/* cost-probe internals: options, the randomised batch scheduler, raw output. */
#ifndef IOLAB_PROBE_H
#define IOLAB_PROBE_H

#include <stdint.h>
#include <stdio.h>

#include "../common/lists.h"
#include "../common/raw_out.h"

#define PROG "cost-probe"
#define RAW_FORMAT_VERSION 2

struct probe_opts {
	long long batches, warmup_batches, seed;
	int cpu;                          /* -1: not pinned */
	/* syscall, send-zc */
	long long batch_us, calls_per_batch;
	const char *variants;
	/* sendrecv, uring-batch */
	const char *transports, *patterns, *ops, *presets, *ack_modes;
	struct int_list bytes, n;
	long long connections;
	double max_not_inline;            /* fraction of SQEs allowed to miss inline completion */
	int starve;                       /* uring-batch recv without queued data (tests) */
};

/* One configuration measured in many batches. Modes fill the descriptive
 * fields and `ctx`; the scheduler counts batches. */
struct cell {
	const char *variant, *transport, *pattern, *ack;
	long long bytes, n, connections;
	void *ctx;
	long long batch;                  /* batches of this cell so far */
	long long sqes, not_inline;       /* measured (non-warm-up) totals */
};

struct batch_result {
	long long calls;                  /* system calls timed in the batch */
	uint64_t ns;                      /* wall time of the batch, one timer pair included */
	long long emptied;                /* recv calls that emptied a receive queue */
	long long not_inline;             /* SQEs whose CQE was not ready right after submit */
};

typedef void (*batch_fn)(struct cell *c, struct batch_result *r);

/* Print "# key=value" metadata common to every mode, then the CSV header. */
int write_header(struct raw_out *out, const char *mode, const struct probe_opts *o, double timer_ns);

/* Run warm-up batches of every cell (shuffled), then the measured ones in a
 * random interleaving, one CSV row per batch. Returns 0 or 1 (write error). */
int run_cells(struct raw_out *out, const char *mode, const struct probe_opts *o, struct cell *cells,
	      size_t ncells, batch_fn fn);

/* The largest of --bytes, after checking that `calls` messages of that size
 * fit the 1 MiB a batch may leave queued on one connection (the socket
 * buffers are 4 MiB); exits 2 with a one-line reason if not. */
long long max_queued_bytes(const struct int_list *bytes, long long calls);

void shuffle_size(size_t *a, size_t n, uint64_t seed);

int mode_syscall(const struct probe_opts *o, struct raw_out *out);
int mode_sendrecv(const struct probe_opts *o, struct raw_out *out);
int mode_uring_batch(const struct probe_opts *o, struct raw_out *out);
int mode_nop(const struct probe_opts *o, struct raw_out *out);
int mode_send_zc(const struct probe_opts *o, struct raw_out *out);

#endif
