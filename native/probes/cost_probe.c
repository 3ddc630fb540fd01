/*
 * cost-probe: measures the per-call costs of the echo cost model
 * (s, w, t(n), and io_uring's own per-SQE overhead).
 *
 * Every mode writes raw samples as CSV, one row per timed batch (warm-up
 * batches included and flagged), preceded by "# key=value" metadata lines.
 * Batches, not single calls, are timed wherever the operation allows, so that
 * the timer's cost stays far below the interval it measures.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/cli.h"
#include "probe.h"

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " MODE [OPTIONS]\n"
		"\n"
		"Measures per-call kernel costs; writes raw CSV, one row per timed batch.\n"
		"\n"
		"Modes:\n"
		"  syscall       s: getppid(2) and an unimplemented syscall (ENOSYS)\n"
		"  sendrecv      s + w: send(2)/recv(2) over TCP loopback and AF_UNIX\n"
		"  uring-batch   t(n): one io_uring_enter with n SEND or n RECV SQEs on n\n"
		"                connections; checks every SQE completed inline\n"
		"  nop           io_uring's own cost: n NOP SQEs per io_uring_enter\n"
		"                (n = 0: a bare io_uring_enter)\n"
		"  send-zc       the sender's time per send by message size: io_uring SEND\n"
		"                against SEND_ZC, which reports whether the kernel copied\n"
		"\n"
		"Options for every mode:\n"
		"  --batches N          measured batches per configuration (default 200)\n"
		"  --warmup-batches N   batches per configuration run first, flagged\n"
		"                       warmup=1 (default 20)\n"
		"  --seed S             seed of the randomised batch order (default 1)\n"
		"  --cpu C              pin to CPU C (default: not pinned); the CPU of\n"
		"                       every batch is recorded either way\n"
		"  --output FILE        write the CSV to FILE instead of standard output\n"
		"  -h, --help           show this help\n"
		"\n"
		"syscall:\n"
		"  --variants LIST      subset of getppid,enosys (default both)\n"
		"  --batch-us US        target batch duration; sets calls per batch (default 50)\n"
		"  --calls-per-batch K  fixed calls per batch instead of calibrating\n"
		"\n"
		"sendrecv:\n"
		"  --transports LIST    subset of tcp,unix (default both)\n"
		"  --ops LIST           subset of send,recv (default both)\n"
		"  --patterns LIST      subset of single,roundrobin (default both): K calls\n"
		"                       on one connection, or one call on each of N\n"
		"                       (every roundrobin recv empties its queue)\n"
		"  --bytes LIST         message sizes (default 16,128,512,1024)\n"
		"  --ack-modes LIST     TCP ACK regimes: pingpong,quickack (default both):\n"
		"                       an untimed echo round before each batch (delayed\n"
		"                       ACKs, as in an echo server), or TCP_QUICKACK on\n"
		"                       both ends (every segment ACKed at once)\n"
		"  --connections N      N for roundrobin (default 64)\n"
		"  --calls-per-batch K  K for single (default 64)\n"
		"\n"
		"uring-batch, nop:\n"
		"  --presets LIST       ring presets: default,coop_taskrun,\n"
		"                       single_issuer_defer_taskrun,register_ring_fd,sqpoll\n"
		"                       (default: default); refused or not applicable\n"
		"                       presets are reported in '# unavailable:' lines\n"
		"  --n LIST             SQEs per io_uring_enter (default 1,2,4,...,256;\n"
		"                       nop also accepts 0)\n"
		"uring-batch only:\n"
		"  --ops LIST           subset of send,recv (default both)\n"
		"  --bytes LIST         message sizes (default 16)\n"
		"  --max-not-inline F   fail if more than this fraction of SQEs did not\n"
		"                       complete inline (default 0.01)\n"
		"  --starve             queue no data before RECV (forces non-inline\n"
		"                       completion; for testing the check)\n"
		"\n"
		"send-zc:\n"
		"  --variants LIST      subset of send,send_zc,send_zc_fixed (default all)\n"
		"  --bytes LIST         message sizes (default 1024,4096,16384,65536)\n"
		"  --calls-per-batch K  sends per batch on one connection (default 8)\n"
		"  After the samples, one '# zc_usage:' line per zero-copy cell counts its\n"
		"  notifications and those that report the kernel copied the data.\n"
		"\n"
		"Output columns:\n"
		"  mode,variant,transport,pattern,ack,bytes,n,connections,seq,batch,warmup,\n"
		"  calls,ns,cpu,emptied,not_inline\n"
		"  pattern: sendrecv pattern or uring ring preset; ack: TCP ACK regime;\n"
		"  seq: position in the randomised run order; batch: index within its\n"
		"  configuration; calls: system calls in the batch; n: SQEs per call;\n"
		"  ns: wall time of the batch including one timer pair, whose median cost\n"
		"  is the timer_overhead_ns metadata line; emptied: recv calls that\n"
		"  emptied a receive queue; not_inline: SQEs not completed at submit.\n");
}

/* Which options each mode accepts, so a flag that would be ignored is an error. */
enum {
	F_BATCHES = 1 << 0, F_WARMUP = 1 << 1, F_SEED = 1 << 2, F_CPU = 1 << 3, F_OUTPUT = 1 << 4,
	F_VARIANTS = 1 << 5, F_BATCH_US = 1 << 6, F_CALLS = 1 << 7, F_TRANSPORTS = 1 << 8,
	F_OPS = 1 << 9, F_PATTERNS = 1 << 10, F_BYTES = 1 << 11, F_CONNECTIONS = 1 << 12,
	F_PRESETS = 1 << 13, F_N = 1 << 14, F_MAX_NOT_INLINE = 1 << 15, F_STARVE = 1 << 16,
	F_ACK_MODES = 1 << 17,
};
#define F_COMMON (F_BATCHES | F_WARMUP | F_SEED | F_CPU | F_OUTPUT)

struct mode {
	const char *name;
	int (*run)(const struct probe_opts *, struct raw_out *);
	unsigned flags;
};

static const struct mode modes[] = {
	{ "syscall", mode_syscall, F_COMMON | F_VARIANTS | F_BATCH_US | F_CALLS },
	{ "sendrecv", mode_sendrecv,
	  F_COMMON | F_TRANSPORTS | F_OPS | F_PATTERNS | F_BYTES | F_CONNECTIONS | F_CALLS |
	  F_ACK_MODES },
	{ "uring-batch", mode_uring_batch,
	  F_COMMON | F_PRESETS | F_N | F_OPS | F_BYTES | F_MAX_NOT_INLINE | F_STARVE },
	{ "nop", mode_nop, F_COMMON | F_PRESETS | F_N },
	{ "send-zc", mode_send_zc, F_COMMON | F_VARIANTS | F_BYTES | F_CALLS },
};

static const struct option longopts[] = {
	{ "batches", required_argument, NULL, F_BATCHES },
	{ "warmup-batches", required_argument, NULL, F_WARMUP },
	{ "seed", required_argument, NULL, F_SEED },
	{ "cpu", required_argument, NULL, F_CPU },
	{ "output", required_argument, NULL, F_OUTPUT },
	{ "variants", required_argument, NULL, F_VARIANTS },
	{ "batch-us", required_argument, NULL, F_BATCH_US },
	{ "calls-per-batch", required_argument, NULL, F_CALLS },
	{ "transports", required_argument, NULL, F_TRANSPORTS },
	{ "ops", required_argument, NULL, F_OPS },
	{ "patterns", required_argument, NULL, F_PATTERNS },
	{ "bytes", required_argument, NULL, F_BYTES },
	{ "connections", required_argument, NULL, F_CONNECTIONS },
	{ "presets", required_argument, NULL, F_PRESETS },
	{ "n", required_argument, NULL, F_N },
	{ "max-not-inline", required_argument, NULL, F_MAX_NOT_INLINE },
	{ "starve", no_argument, NULL, F_STARVE },
	{ "ack-modes", required_argument, NULL, F_ACK_MODES },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static const char *flag_name(int flag)
{
	for (const struct option *o = longopts; o->name; o++)
		if (o->val == flag)
			return o->name;
	return "?";
}

static double parse_fraction(const char *text)
{
	char *end = NULL;
	double v;

	errno = 0;
	v = strtod(text, &end);
	/* NaN compares false both ways: ask for the range, not its outside. */
	if (errno || !end || end == text || *end || !(v >= 0.0 && v <= 1.0)) {
		fprintf(stderr, PROG ": --max-not-inline: '%s' is not a fraction in [0, 1]\n", text);
		exit(2);
	}
	return v;
}

int main(int argc, char **argv)
{
	struct probe_opts o = {
		.batches = 200, .warmup_batches = 20, .seed = 1, .cpu = -1,
		.batch_us = 50, .calls_per_batch = 0, .variants = "getppid,enosys",
		.transports = "tcp,unix", .patterns = "single,roundrobin", .ops = "send,recv",
		.presets = "default", .ack_modes = "pingpong,quickack", .connections = 64, .max_not_inline = 0.01, .starve = 0,
	};
	const char *bytes_text = NULL, *n_text = NULL, *output = NULL, *variants = NULL;
	const struct mode *mode = NULL;
	struct raw_out out;
	int opt, rc;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, PROG ": missing MODE (one of: syscall, sendrecv, uring-batch, nop, send-zc); see --help\n");
		return 2;
	}
	for (size_t i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		if (strcmp(argv[1], modes[i].name) == 0)
			mode = &modes[i];
	if (!mode) {
		fprintf(stderr, PROG ": unknown mode '%s' (known: syscall, sendrecv, uring-batch, nop, send-zc); see --help\n",
			argv[1]);
		return 2;
	}
	optind = 2;
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			return 0;
		}
		if (opt == '?') {
			fprintf(stderr, PROG ": bad option; see --help\n");
			return 2;
		}
		if (!(mode->flags & (unsigned)opt)) {
			fprintf(stderr, PROG ": --%s does not apply to mode %s; see --help\n",
				flag_name(opt), mode->name);
			return 2;
		}
		switch (opt) {
		case F_BATCHES: o.batches = parse_int_flag(PROG, "--batches", optarg, 1, 100000000); break;
		case F_WARMUP: o.warmup_batches = parse_int_flag(PROG, "--warmup-batches", optarg, 0, 100000000); break;
		case F_SEED: o.seed = parse_int_flag(PROG, "--seed", optarg, 0, INT64_MAX); break;
		case F_CPU: o.cpu = (int)parse_int_flag(PROG, "--cpu", optarg, 0, CPU_SETSIZE - 1); break;
		case F_OUTPUT: output = optarg; break;
		case F_VARIANTS: variants = optarg; break;
		case F_BATCH_US: o.batch_us = parse_int_flag(PROG, "--batch-us", optarg, 1, 60000000); break;
		case F_CALLS: o.calls_per_batch = parse_int_flag(PROG, "--calls-per-batch", optarg, 1, 1000000000); break;
		case F_TRANSPORTS: o.transports = optarg; break;
		case F_OPS: o.ops = optarg; break;
		case F_PATTERNS: o.patterns = optarg; break;
		case F_BYTES: bytes_text = optarg; break;
		case F_CONNECTIONS: o.connections = parse_int_flag(PROG, "--connections", optarg, 1, 65536); break;
		case F_PRESETS: o.presets = optarg; break;
		case F_N: n_text = optarg; break;
		case F_MAX_NOT_INLINE: o.max_not_inline = parse_fraction(optarg); break;
		case F_STARVE: o.starve = 1; break;
		case F_ACK_MODES: o.ack_modes = optarg; break;
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
	if (mode->run == mode_send_zc)
		o.variants = "send,send_zc,send_zc_fixed";
	if (variants)
		o.variants = variants;
	o.bytes = parse_int_list(PROG, "--bytes", bytes_text ? bytes_text :
				 mode->run == mode_sendrecv ? "16,128,512,1024" :
				 mode->run == mode_send_zc ? "1024,4096,16384,65536" : "16", 1, 1 << 20);
	o.n = parse_int_list(PROG, "--n", n_text ? n_text : "1,2,4,8,16,32,64,128,256",
			     mode->run == mode_nop ? 0 : 1, 4096);
	if (o.cpu >= 0)
		pin_to_cpu(PROG, o.cpu);
	if (raw_open(&out, output)) {
		fprintf(stderr, PROG ": --output %s: %s\n", output, strerror(out.err));
		return 2;
	}
	rc = mode->run(&o, &out);
	if (raw_close(&out, PROG))
		return 1;
	free(o.bytes.v);
	free(o.n.v);
	return rc;
}
