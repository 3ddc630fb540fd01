/* echo-uring's options. Each flag is declared once, in `flags` below: its
 * name, the field of struct options it sets, its kind and range, and its
 * --help text. The getopt table, the parsing, --help and the configuration
 * the final JSON line carries are made from it. Then the combinations we
 * refuse before any ring exists. A new flag costs its line here, its field
 * in struct options, and its code. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/cli.h"
#include "config.h"
#include "echo_uring.h"

enum kind {
	ON,       /* no argument: sets an int to 1 */
	INT,      /* an int in [lo, hi] */
	UINT,     /* an unsigned in [lo, hi] */
	TEXT,     /* a string, kept as given */
	CPUS,     /* a CPU list such as 2-3,6 (--iowq-aff) */
	HEADING,  /* not a flag: a heading of --help */
};

struct flag {
	const char *name;   /* the long option, without its dashes */
	enum kind kind;
	size_t off;         /* of the field in struct options */
	long long lo, hi;
	const char *arg;    /* the argument's name in --help */
	const char *help;   /* each line after the first is indented under it */
	const char *key;    /* the field's name in the final line's configuration */
};

#define O(field) offsetof(struct options, field)
#define FLAG_ON(name, field, key, help) { name, ON, O(field), 0, 0, "", help, key }
#define FLAG_INT(name, field, key, lo, hi, arg, help) { name, INT, O(field), lo, hi, arg, help, key }
#define FLAG_UINT(name, field, key, lo, hi, arg, help) { name, UINT, O(field), lo, hi, arg, help, key }
#define FLAG_TEXT(name, field, key, arg, help) { name, TEXT, O(field), 0, 0, arg, help, key }
/* A CPU list: the text goes in `field`, the set in iowq_set. */
#define FLAG_CPUS(name, field, key, arg, help) { name, CPUS, O(field), 0, 0, arg, help, key }
#define HEADING(text) { NULL, HEADING, 0, 0, 0, NULL, text, NULL }

static const struct flag flags[] = {
	FLAG_INT("port", port, "port", 0, 65535, "P", "TCP port (required; 0 picks one, reported on stderr)"),
	FLAG_TEXT("bind", bind, "bind", "ADDR", "IPv4 address to bind (default 127.0.0.1)"),
	HEADING("Ring setup:"),
	FLAG_UINT("entries", ring.entries, "entries", 1, 32768, "N", "SQ entries (default 1024)"),
	FLAG_UINT("cq-size", ring.cq_size, "cq_size", 1, 1 << 20, "N", "CQ entries (IORING_SETUP_CQSIZE)"),
	FLAG_ON("clamp", ring.clamp, "clamp", "clamp sizes to the kernel maximum (IORING_SETUP_CLAMP)"),
	FLAG_ON("sqpoll", ring.sqpoll, "sqpoll", "kernel submission thread (IORING_SETUP_SQPOLL)"),
	FLAG_INT("sq-thread-idle", ring.sq_thread_idle, "sq_thread_idle", 0, 3600000, "MS",
		 "SQPOLL thread idle time before it sleeps (default 1000)"),
	FLAG_INT("sq-aff", ring.sq_aff, "sq_aff", 0, 4095, "CPU", "pin the SQPOLL thread (IORING_SETUP_SQ_AFF)"),
	FLAG_ON("attach-wq", attach_wq, "attach_wq", "rings share ring 0's io-wq (IORING_SETUP_ATTACH_WQ)"),
	FLAG_CPUS("iowq-aff", iowq_aff, "iowq_aff", "CPUS",
		  "CPUs (a list such as 2-3,6) io-wq workers run on\n(IORING_REGISTER_IOWQ_AFF); by default they inherit\n"
		  "the server's own CPU affinity"),
	FLAG_ON("r-disabled", ring.r_disabled, "r_disabled",
		"create rings disabled, then enable them (IORING_SETUP_R_DISABLED)"),
	FLAG_ON("coop-taskrun", ring.coop_taskrun, "coop_taskrun", "IORING_SETUP_COOP_TASKRUN"),
	FLAG_ON("taskrun-flag", ring.taskrun_flag, "taskrun_flag", "IORING_SETUP_TASKRUN_FLAG"),
	FLAG_ON("single-issuer", ring.single_issuer, "single_issuer", "IORING_SETUP_SINGLE_ISSUER"),
	FLAG_ON("defer-taskrun", ring.defer_taskrun, "defer_taskrun",
		"IORING_SETUP_DEFER_TASKRUN (needs --single-issuer)"),
	FLAG_ON("register-ring-fd", ring.register_ring_fd, "register_ring_fd", "io_uring_register_ring_fd"),
	HEADING("Per-SQE flags and modes:"),
	FLAG_ON("async", async, "async", "IOSQE_ASYNC on receives and sends (work goes to io-wq)"),
	FLAG_ON("buf-select", buf_select, "buf_select", "legacy provided buffers (IORING_OP_PROVIDE_BUFFERS)"),
	FLAG_ON("buf-ring", buf_ring, "buf_ring", "ring-mapped provided buffers (io_uring_register_buf_ring)"),
	FLAG_UINT("buf-size", buf_size, "buf_size", 1, 1 << 20, "BYTES", "receive buffer size (default 4096)"),
	FLAG_UINT("buf-count", buf_count, "buf_count", 1, 32768, "N",
		  "provided buffers per ring, a power of two (default 4096)"),
	FLAG_UINT("hold-share", hold_pct, "hold_pct", 0, 100, "PCT",
		  "the share of a ring's provided buffers its connections may\nkeep queued together, 1-100 (default "
		  "50): each holds at\nmost PCT % / its open connections and copies the rest,\nso clients that stop "
		  "reading cannot starve the others;\n0: no cap (a bundle may take what the ring has)"),
	FLAG_ON("fixed-files", fixed_files, "fixed_files", "registered file descriptors (IOSQE_FIXED_FILE)"),
	FLAG_INT("link-timeout", link_timeout_ms, "link_timeout_ms", 1, 3600000, "MS",
		 "IOSQE_IO_LINK + IORING_OP_LINK_TIMEOUT on each receive;\nan idle connection's receive is re-armed "
		 "when it fires"),
	FLAG_ON("hardlink", hardlink, "hardlink", "use IOSQE_IO_HARDLINK for that link"),
	FLAG_ON("drain", drain, "drain",
		"IOSQE_IO_DRAIN on receives and sends. This stalls by\ndesign: every SQE waits for all earlier ones, "
		"including\nthe pending accept and other connections' receives,\nso an echo goes out only once those "
		"complete"),
	HEADING("Operations:"),
	FLAG_ON("multishot-accept", multishot_accept, "multishot_accept", "one multishot accept"),
	FLAG_ON("multishot-recv", multishot_recv, "multishot_recv",
		"multishot receive (needs --buf-ring or --buf-select)"),
	FLAG_ON("send-zc", send_zc, "send_zc", "zero-copy send (IORING_OP_SEND_ZC)"),
	FLAG_ON("reg-wait", reg_wait, "reg_wait",
		"each wait reads its argument (timeout, --min-wait) from a\nregion registered at setup "
		"(IORING_REGISTER_MEM_REGION,\nIORING_ENTER_EXT_ARG_REG, Linux 6.13) instead of one the\nkernel "
		"copies in per wait"),
	FLAG_ON("zc-fixed", zc_fixed, "zc_fixed",
		"zero-copy sends of received data go out from the provided\nbuffers, registered as one fixed "
		"buffer\n(IORING_RECVSEND_FIXED_BUF; needs --send-zc and --buf-ring\nor --buf-select). Every zero-copy "
		"send asks for a usage\nreport (Linux 6.2+): the final line counts zc_copied\n(loopback copies every "
		"send)"),
	FLAG_UINT("wait-nr", wait_nr, "wait_nr", 1, 1 << 20, "N",
		  "each wait asks for N completions (default 1); above 1\nneeds --min-wait"),
	FLAG_ON("recv-bundle", recv_bundle, "recv_bundle",
		"receive bundles: one completion for as many provided\nbuffers as the data fills "
		"(IORING_RECVSEND_BUNDLE,\nLinux 6.10; needs --buf-ring)"),
	FLAG_ON("buf-inc", buf_inc, "buf_inc",
		"incremental buffer ring: completions use a buffer a\nmessage at a time (IOU_PBUF_RING_INC, Linux "
		"6.12;\nneeds --buf-ring; use a large --buf-size; with\n--recv-bundle a completion spans several "
		"buffers,\nfrom where the last left the first)"),
	FLAG_ON("gather-send", gather_send, "gather_send",
		"one SENDMSG for every chunk queued on a connection (up\nto IOV_MAX), not a SEND per chunk: with "
		"--recv-bundle a\nbundle goes back in one send"),
	FLAG_ON("send-bundle", send_bundle, "send_bundle",
		"send bundles: each connection's queued chunks go into a\nsend buffer ring of its own (256 entries, "
		"incremental),\nsent by one SEND with IORING_RECVSEND_BUNDLE until it is\nempty (Linux 6.12+; "
		"descriptors from 65534 send plainly)"),
	FLAG_UINT("min-wait", min_wait_us, "min_wait_us", 1, 10000000, "USEC",
		  "batched waits (IORING_ENTER_EXT_ARG min_wait_usec, Linux\n6.12+): a wait returns after USEC with the "
		  "completions\nthat arrived, at least one, or at once with N of them"),
	FLAG_UINT("napi", napi_us, "napi_us", 1, 10000000, "USEC",
		  "NAPI busy polling: each wait polls the NAPI instances of\nthe ring's sockets for up to USEC "
		  "(IORING_REGISTER_NAPI,\nLinux 6.9); the final line counts connections that had\na NAPI id (none on "
		  "loopback or veth: inert there)"),
	FLAG_ON("poll-first", poll_first, "poll_first",
		"a multishot poll per connection; on readiness a RECV, and\nevery SEND, with MSG_DONTWAIT, so each "
		"completes inside\nthe io_uring_enter that submits it (no task work, no\nio-wq), as the OpenAnolis "
		"study's server"),
	HEADING("Rings:"),
	FLAG_INT("rings", rings, "rings", 1, 1024, "N", "one ring per thread (default 1)"),
	FLAG_INT("granule", granule, "granule", 1, 1 << 20, "G", "ring 0 accepts; fd goes to ring (fd / G) % N"),
};

#define NFLAGS (sizeof(flags) / sizeof(flags[0]))

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [OPTIONS]\n"
		"\n"
		"TCP echo server on io_uring (liburing %s). Prints one JSON line of counters\n"
		"and exits 0 on SIGTERM or SIGINT. Refused flag combinations exit 2 with the\n"
		"reason; a port already in use exits 3.\n"
		"\n",
		IOLAB_LIBURING_VERSION);
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *fl = &flags[i];
		const char *line = fl->help;
		char *left;

		if (fl->kind == HEADING) {
			fprintf(f, "%s\n", fl->help);
			continue;
		}
		if (asprintf(&left, "--%s%s%s", fl->name, *fl->arg ? " " : "", fl->arg) < 0)
			die("formatting --help", ENOMEM);
		fprintf(f, "  %-20s ", left);
		free(left);
		for (const char *nl; (nl = strchr(line, '\n')); line = nl + 1)
			fprintf(f, "%.*s\n%23s", (int)(nl - line), line, "");
		fprintf(f, "%s\n", line);
	}
	fprintf(f, "  %-20s show this help\n", "-h, --help");
}

/* One range of a CPU list ("4" or "2-5") at *p, which moves past it and a
 * following comma; -1 if the text is not a CPU list. */
static int next_cpu_range(const char **p, long *lo, long *hi)
{
	char *end;

	if (!isdigit((unsigned char)**p))
		return -1;
	errno = 0;
	*lo = *hi = strtol(*p, &end, 10);
	if (*end == '-') {
		if (!isdigit((unsigned char)end[1]))
			return -1;
		*hi = strtol(end + 1, &end, 10);
	}
	/* CPU ids above the kernel's largest NR_CPUS (8192) are typos. */
	if (errno != 0 || *lo > *hi || *hi >= 8192 || (*end != ',' && *end != '\0'))
		return -1;
	if (*end == ',' && end[1] == '\0')
		return -1;
	*p = *end == ',' ? end + 1 : end;
	return 0;
}

/* "2-3,6" (taskset -c style) into o->iowq_set, sized for its largest CPU. */
static void parse_iowq_aff(struct options *o, const char *text)
{
	const char *p = text;
	long lo, hi, max = -1;

	while (*p) {
		if (next_cpu_range(&p, &lo, &hi) != 0)
			break;
		if (hi > max)
			max = hi;
	}
	if (*p || max < 0) {
		fprintf(stderr, PROG ": --iowq-aff: '%s' is not a CPU list such as 2-3,6\n", text);
		exit(2);
	}
	if (max >= sysconf(_SC_NPROCESSORS_CONF)) {
		fprintf(stderr, PROG ": --iowq-aff %s: this machine has no CPU %ld\n", text, max);
		exit(2);
	}
	CPU_FREE(o->iowq_set);   /* the flag given again: the last list counts */
	o->iowq_set = CPU_ALLOC((int)max + 1);
	if (!o->iowq_set)
		die("allocating a CPU set", ENOMEM);
	o->iowq_setsize = CPU_ALLOC_SIZE((int)max + 1);
	CPU_ZERO_S(o->iowq_setsize, o->iowq_set);
	for (p = text; *p && next_cpu_range(&p, &lo, &hi) == 0;)
		for (long c = lo; c <= hi; c++)
			CPU_SET_S((size_t)c, o->iowq_setsize, o->iowq_set);
	o->iowq_aff = text;
}

static void set_flag(struct options *o, const struct flag *fl, const char *arg)
{
	char *field = (char *)o + fl->off;
	char *dashed;

	if (asprintf(&dashed, "--%s", fl->name) < 0)
		die("naming a flag", ENOMEM);
	switch (fl->kind) {
	case ON: *(int *)(void *)field = 1; break;
	case INT: *(int *)(void *)field = (int)parse_int_flag(PROG, dashed, arg, fl->lo, fl->hi); break;
	case UINT: *(unsigned *)(void *)field = (unsigned)parse_int_flag(PROG, dashed, arg, fl->lo, fl->hi); break;
	case TEXT: *(const char **)(void *)field = arg; break;
	case CPUS: parse_iowq_aff(o, arg); break;
	case HEADING: break;
	}
	free(dashed);
}

void refuse(const char *why)
{
	fprintf(stderr, PROG ": %s\n", why);
	exit(2);
}

static void check_combinations(const struct options *o)
{
	const char *ring_conflict = ring_setup_conflict(&o->ring);

	if (ring_conflict)
		refuse(ring_conflict);
	if (o->buf_ring && o->buf_select)
		refuse("--buf-ring and --buf-select are alternatives; choose one");
	if (o->multishot_recv && !o->buf_ring && !o->buf_select)
		refuse("--multishot-recv needs provided buffers: add --buf-ring or --buf-select");
	if (o->link_timeout_ms > 0 && o->multishot_recv)
		refuse("--link-timeout applies to single-shot receives; it cannot be combined with --multishot-recv");
	if (o->hardlink && o->link_timeout_ms <= 0)
		refuse("--hardlink links the receive to its timeout; it needs --link-timeout");
	if (o->granule > 0 && o->rings < 2)
		refuse("--granule routes connections between rings; it needs --rings 2 or more");
	if (o->attach_wq && o->rings < 2)
		refuse("--attach-wq shares one io-wq between rings; it needs --rings 2 or more");
	if (o->poll_first && (o->buf_ring || o->buf_select || o->multishot_recv))
		refuse("--poll-first receives into each connection's own buffer; it cannot be combined with "
		       "--buf-ring, --buf-select or --multishot-recv");
	if (o->poll_first && (o->async || o->drain || o->link_timeout_ms > 0 || o->send_zc))
		refuse("--poll-first completes every receive and send in its submission; it cannot be combined "
		       "with --async, --drain, --link-timeout or --send-zc");
	if (o->buf_count == 0 || (o->buf_count & (o->buf_count - 1)) || o->buf_count > 32768)
		refuse("--buf-count must be a power of two up to 32768");
	if (o->recv_bundle && !o->buf_ring)
		refuse("--recv-bundle takes several buffers from a buffer ring: add --buf-ring");
	if (o->buf_inc && !o->buf_ring)
		refuse("--buf-inc is a kind of buffer ring: add --buf-ring");
	if (o->zc_fixed && !o->send_zc)
		refuse("--zc-fixed registers the buffers zero-copy sends go out from: add --send-zc");
	if (o->zc_fixed && !o->buf_ring && !o->buf_select)
		refuse("--zc-fixed registers the provided buffers: add --buf-ring or --buf-select");
	if (o->send_bundle && (o->send_zc || o->gather_send || o->poll_first))
		refuse("--send-bundle sends from a buffer ring per connection; it cannot be combined with "
		       "--send-zc, --gather-send or --poll-first");
	if (o->gather_send && o->send_zc)
		refuse("--gather-send with --send-zc is not built: it would need IORING_OP_SENDMSG_ZC; choose one");
	if (o->wait_nr > 1 && !o->min_wait_us)
		refuse("--wait-nr above 1 would wait for that many completions however long they take; "
		       "add --min-wait USEC");
}

void options_parse(struct options *o, int argc, char **argv)
{
	struct option *longopts = calloc(NFLAGS + 2, sizeof(*longopts));
	size_t n = 0;
	int opt;

	if (!longopts)
		die("allocating the option table", ENOMEM);
	*o = (struct options){
		.bind = "127.0.0.1", .port = -1, .ring = RING_SETUP_DEFAULT(1024),
		.rings = 1, .buf_size = 4096, .buf_count = 4096, .hold_pct = 50, .iowq_aff = "", .wait_nr = 1,
	};
	for (size_t i = 0; i < NFLAGS; i++)
		if (flags[i].kind != HEADING)
			longopts[n++] = (struct option){ flags[i].name, flags[i].kind == ON ? no_argument : required_argument,
							 NULL, 256 + (int)i };
	longopts[n] = (struct option){ "help", no_argument, NULL, 'h' };
	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (opt >= 256 && (size_t)(opt - 256) < NFLAGS) {
			set_flag(o, &flags[opt - 256], optarg);
			continue;
		}
		if (opt == 'h') {
			usage(stdout);
			exit(0);
		}
		fprintf(stderr, PROG ": bad option; see --help\n");
		exit(2);
	}
	free(longopts);
	reject_extra_args(PROG, optind, argc, argv);
	require_flag(PROG, o->port >= 0, "--port");
	check_combinations(o);
}

/* A string as JSON, quotes included. */
static void json_string(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fprintf(f, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			fprintf(f, "\\u%04x", (unsigned char)*s);
		else
			fputc(*s, f);
	}
	fputc('"', f);
}

char *options_json(const struct options *o, int iowq_workers)
{
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	if (!f)
		die("formatting the configuration", errno);
	fputc('{', f);
	for (size_t i = 0; i < NFLAGS; i++) {
		const struct flag *fl = &flags[i];
		const char *field = (const char *)o + fl->off;

		if (fl->kind == HEADING)
			continue;
		fprintf(f, "\"%s\": ", fl->key);
		if (fl->kind == UINT)
			fprintf(f, "%u", *(const unsigned *)(const void *)field);
		else if (fl->kind == TEXT || fl->kind == CPUS)
			json_string(f, *(const char *const *)(const void *)field);
		else
			fprintf(f, "%d", *(const int *)(const void *)field);
		fputs(", ", f);
	}
	fprintf(f, "\"iowq_workers_at_exit\": %d, \"liburing\": \"%s\"}", iowq_workers, IOLAB_LIBURING_VERSION);
	if (fclose(f) != 0)
		die("formatting the configuration", errno);
	return out;
}
