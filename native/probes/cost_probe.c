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

#define MODES_BEGIN __start_iolab_probe_modes
#define MODES_END __stop_iolab_probe_modes

/* A mode's text, each line after the first indented to `indent` columns. */
static void print_indented(FILE *f, const char *text, int indent)
{
	for (const char *line = text; *line;) {
		const char *nl = strchr(line, '\n');
		int len = nl ? (int)(nl - line) : (int)strlen(line);

		fprintf(f, "%.*s\n", len, line);
		if (!nl || !nl[1])
			break;
		line = nl + 1;
		fprintf(f, "%*s", indent, "");
	}
}

static void mode_names(FILE *f)
{
	for (const struct probe_mode *const *m = MODES_BEGIN; m < MODES_END; m++)
		fprintf(f, "%s%s", m == MODES_BEGIN ? "" : ", ", (*m)->name);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " MODE [OPTIONS]\n"
		"\n"
		"Measures per-call kernel costs; writes raw CSV, one row per timed batch.\n"
		"\n"
		"Modes:\n");
	for (const struct probe_mode *const *m = MODES_BEGIN; m < MODES_END; m++) {
		fprintf(f, "  %-13s ", (*m)->name);
		print_indented(f, (*m)->summary, 16);
	}
	fprintf(f,
		"\n"
		"Options for every mode:\n"
		"  --batches N          measured batches per configuration\n"
		"  --warmup-batches N   batches per configuration run first, flagged\n"
		"                       warmup=1\n"
		"  --seed S             seed of the randomised batch order (default 1)\n"
		"  --cpu C              pin to CPU C (default: not pinned); the CPU of\n"
		"                       every batch is recorded either way\n"
		"  --output FILE        write the CSV to FILE instead of standard output\n"
		"  --defaults           print the mode's defaults, one key=value a line,\n"
		"                       and exit (they are its experiment's defaults in\n"
		"                       config/schema.yaml)\n"
		"  -h, --help           show this help\n");
	for (const struct probe_mode *const *m = MODES_BEGIN; m < MODES_END; m++)
		fprintf(f, "\n%s:\n%s  defaults: %s\n", (*m)->name, (*m)->usage, (*m)->defaults);
	fprintf(f,
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
	{ "defaults", no_argument, NULL, 'd' },
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

/* The mode's defaults, "--key value" words, as key=value lines. */
static void print_defaults(const struct probe_mode *mode)
{
	for (const char *w = mode->defaults; *w;) {
		const char *end = strchr(w, ' ');
		int len = end ? (int)(end - w) : (int)strlen(w);

		if (len > 2 && w[0] == '-' && w[1] == '-')
			printf("%s%.*s", w == mode->defaults ? "" : "\n", len - 2, w + 2);
		else
			printf("=%.*s", len, w);
		w += len;
		while (*w == ' ')
			w++;
	}
	printf("\n");
}

/* What the options set; the list-valued ones are parsed once all are in. */
struct parsed {
	struct probe_opts o;
	const char *bytes_text, *n_text, *output;
};

/* Applies the options in argv[1..argc-1] for `mode`; exits 2 with one line
 * on a bad or inapplicable option, 0 after --help or --defaults. */
static void parse_options(struct parsed *p, const struct probe_mode *mode, int argc, char **argv)
{
	int opt;

	optind = 0;		/* GNU getopt: start over (the defaults came first) */
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt == 'h') {
			usage(stdout);
			exit(0);
		}
		if (opt == 'd') {
			print_defaults(mode);
			exit(0);
		}
		if (opt == '?') {
			fprintf(stderr, PROG ": bad option; see --help\n");
			exit(2);
		}
		if (!(mode->flags & (unsigned)opt)) {
			fprintf(stderr, PROG ": --%s does not apply to mode %s; see --help\n", flag_name(opt), mode->name);
			exit(2);
		}
		switch (opt) {
		case F_BATCHES: p->o.batches = parse_int_flag(PROG, "--batches", optarg, 1, 100000000); break;
		case F_WARMUP: p->o.warmup_batches = parse_int_flag(PROG, "--warmup-batches", optarg, 0, 100000000); break;
		case F_SEED: p->o.seed = parse_int_flag(PROG, "--seed", optarg, 0, INT64_MAX); break;
		case F_CPU: p->o.cpu = (int)parse_int_flag(PROG, "--cpu", optarg, 0, CPU_SETSIZE - 1); break;
		case F_OUTPUT: p->output = optarg; break;
		case F_VARIANTS: p->o.variants = optarg; break;
		case F_BATCH_US: p->o.batch_us = parse_int_flag(PROG, "--batch-us", optarg, 1, 60000000); break;
		case F_CALLS: p->o.calls_per_batch = parse_int_flag(PROG, "--calls-per-batch", optarg, 1, 1000000000); break;
		case F_TRANSPORTS: p->o.transports = optarg; break;
		case F_OPS: p->o.ops = optarg; break;
		case F_PATTERNS: p->o.patterns = optarg; break;
		case F_BYTES: p->bytes_text = optarg; break;
		case F_CONNECTIONS: p->o.connections = parse_int_flag(PROG, "--connections", optarg, 1, 65536); break;
		case F_PRESETS: p->o.presets = optarg; break;
		case F_N: p->n_text = optarg; break;
		case F_MAX_NOT_INLINE: p->o.max_not_inline = parse_fraction(optarg); break;
		case F_STARVE: p->o.starve = 1; break;
		case F_ACK_MODES: p->o.ack_modes = optarg; break;
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
}

/* The mode's defaults as an argv: "cost-probe" then its words. */
static char **defaults_argv(const struct probe_mode *mode, char **text, int *argc)
{
	size_t words = 2;
	char **argv, *save = NULL;

	*text = strdup(mode->defaults);
	for (const char *c = mode->defaults; *c; c++)
		words += *c == ' ';
	argv = calloc(words + 1, sizeof(*argv));
	if (!*text || !argv) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	*argc = 0;
	argv[(*argc)++] = (char *)PROG;
	for (char *w = strtok_r(*text, " ", &save); w; w = strtok_r(NULL, " ", &save))
		argv[(*argc)++] = w;
	return argv;
}

int main(int argc, char **argv)
{
	struct parsed p = {
		.o = { .seed = 1, .cpu = -1, .batch_us = 50, .calls_per_batch = 0, .variants = "",
		       .transports = "", .patterns = "", .ops = "", .presets = "default", .ack_modes = "",
		       .connections = 64, .max_not_inline = 0.01, .starve = 0 },
	};
	const struct probe_mode *mode = NULL;
	struct raw_out out;
	char *defaults_text, **dargv;
	int dargc, rc;

	if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, PROG ": missing MODE (one of: ");
		mode_names(stderr);
		fprintf(stderr, "); see --help\n");
		return 2;
	}
	for (const struct probe_mode *const *m = MODES_BEGIN; m < MODES_END; m++)
		if (strcmp(argv[1], (*m)->name) == 0)
			mode = *m;
	if (!mode) {
		fprintf(stderr, PROG ": unknown mode '%s' (known: ", argv[1]);
		mode_names(stderr);
		fprintf(stderr, "); see --help\n");
		return 2;
	}
	/* The mode's defaults first, then the command line over them. */
	dargv = defaults_argv(mode, &defaults_text, &dargc);
	parse_options(&p, mode, dargc, dargv);
	argv[1] = argv[0];
	parse_options(&p, mode, argc - 1, argv + 1);
	p.o.bytes = parse_int_list(PROG, "--bytes", p.bytes_text ? p.bytes_text : "16", 1, 1 << 20);
	p.o.n = parse_int_list(PROG, "--n", p.n_text ? p.n_text : "1", mode->min_n, 4096);
	if (p.o.cpu >= 0)
		pin_to_cpu(PROG, p.o.cpu);
	if (raw_open(&out, p.output)) {
		fprintf(stderr, PROG ": --output %s: %s\n", p.output, strerror(out.err));
		return 2;
	}
	rc = mode->run(&p.o, &out);
	if (raw_close(&out, PROG))
		return 1;
	free(p.o.bytes.v);
	free(p.o.n.v);
	free(dargv);
	free(defaults_text);
	return rc;
}
