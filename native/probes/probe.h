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

/* --help's lines for the options calls_per_batch reads. */
#define USAGE_CALLS_PER_BATCH \
	"  --batch-us US        target batch duration; sets calls per batch\n" \
	"  --calls-per-batch K  fixed calls per batch instead of calibrating\n"

/* Times `calls` calls of one cell's operation (its context in `ctx`), in ns. */
typedef uint64_t (*time_calls_fn)(void *ctx, long long calls);

/* The calls one batch of a cell times: --calls-per-batch, else as many as
 * last about --batch-us by a 2000-call pilot. 0, after one line on stderr
 * naming `what`, where the timer pair would be more than 5 % of a batch. */
long long calls_per_batch(const struct probe_opts *o, const char *what, double timer_ns, time_calls_fn fn, void *ctx);

/* The options, as bits: a mode lists those it accepts, so a flag that
 * would be ignored is an error. */
enum {
	F_BATCHES = 1 << 0, F_WARMUP = 1 << 1, F_SEED = 1 << 2, F_CPU = 1 << 3, F_OUTPUT = 1 << 4,
	F_VARIANTS = 1 << 5, F_BATCH_US = 1 << 6, F_CALLS = 1 << 7, F_TRANSPORTS = 1 << 8,
	F_OPS = 1 << 9, F_PATTERNS = 1 << 10, F_BYTES = 1 << 11, F_CONNECTIONS = 1 << 12,
	F_PRESETS = 1 << 13, F_N = 1 << 14, F_MAX_NOT_INLINE = 1 << 15, F_STARVE = 1 << 16,
	F_ACK_MODES = 1 << 17,
};
#define F_COMMON (F_BATCHES | F_WARMUP | F_SEED | F_CPU | F_OUTPUT)

/* A mode of cost-probe, declared by its own *_mode.c with PROBE_MODE:
 * cost-probe lists, documents and runs the modes from these entries alone. */
struct probe_mode {
	const char *name;
	const char *summary;    /* its lines under "Modes:" in --help */
	const char *usage;      /* its own options, for --help */
	unsigned flags;         /* the options it accepts */
	/* Its defaults, as options applied before the command line's; they are
	 * the defaults of its manifest (config/experiments/<name>.yaml), which a test checks
	 * (cost-probe MODE --defaults prints them). */
	const char *defaults;
	long long min_n;        /* the smallest --n it takes */
	int (*run)(const struct probe_opts *o, struct raw_out *out);
};

/* Registers `mode` (a struct probe_mode) in the section the linker gathers
 * into one array; a new *_mode.c needs no other list. */
#define PROBE_MODE(mode) \
	static const struct probe_mode *const mode##_entry \
		__attribute__((used, section("iolab_probe_modes"))) = &(mode)

extern const struct probe_mode *const __start_iolab_probe_modes[];
extern const struct probe_mode *const __stop_iolab_probe_modes[];

#endif
