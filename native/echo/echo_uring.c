/*
 * echo-uring: a TCP echo server on io_uring (liburing), with one flag for
 * every ring configuration the sources discuss.
 *
 * Per connection, receives and sends alternate with at most one SEND in
 * flight, so bytes are never reordered; a short send is resubmitted for the
 * rest. With provided buffers and multishot receive, chunks queue per
 * connection; when a connection's queue is full its multishot receive is
 * cancelled (backpressure) and re-armed once the queue drains, so a slow
 * reader cannot take the buffers of the others.
 *
 * --rings N runs one ring per thread. Without --granule each ring accepts on
 * its own SO_REUSEPORT listener; with --granule G ring 0 accepts and routes
 * each connection to ring (fd / G) % N with IORING_OP_MSG_RING, as the
 * sources' reactor does. Each ring has its own fd-indexed connection table,
 * touched by its thread only: a descriptor closed on one ring and reused by
 * the kernel for a connection of another never shares state between threads.
 * SIGTERM/SIGINT are blocked in every thread and read from a signalfd by
 * ring 0's thread, at most every STOP_CHECK_MS while it waits; it then wakes
 * the other rings with IORING_OP_MSG_RING. No signal handler interrupts a
 * wait (nor is needed: a sanitizer that defers handlers cannot stall it).
 *
 * SIGTERM/SIGINT: exit 0 with one JSON line of counters. A flag combination
 * we or the kernel refuse exits 2 with a one-line reason; a port in use 3.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/timing.h"
#include "../common/uring_compat.h"
#include "config.h"
#include "echo_uring.h"
#include "server.h"

struct options opts = {
	.bind = "127.0.0.1", .port = -1, .ring = RING_SETUP_DEFAULT(1024),
	.rings = 1, .buf_size = 4096, .buf_count = 4096, .hold_pct = 50, .iowq_aff = "", .wait_nr = 1,
};
size_t nconns;             /* every connection table's size */
struct uring_ctx *rings;
int stop_fd = -1;          /* signalfd for SIGTERM/SIGINT, read by ring 0 */
atomic_int stopping;       /* set by ring 0 once a stop signal arrived */
/* The kernel copies the timeout at submission; one value serves every SQE. */
struct __kernel_timespec link_ts;

/* --iowq-aff: the CPUs io-wq workers may run on (NULL: as the kernel decides,
 * which is the server's own affinity). */
static cpu_set_t *iowq_set;
static size_t iowq_setsize;

static void refuse(const char *why)
{
	fprintf(stderr, PROG ": %s\n", why);
	exit(2);
}

static void check_combinations(void)
{
	const char *ring_conflict = ring_setup_conflict(&opts.ring);

	if (ring_conflict)
		refuse(ring_conflict);
	if (opts.buf_ring && opts.buf_select)
		refuse("--buf-ring and --buf-select are alternatives; choose one");
	if (opts.multishot_recv && !opts.buf_ring && !opts.buf_select)
		refuse("--multishot-recv needs provided buffers: add --buf-ring or --buf-select");
	if (opts.link_timeout_ms > 0 && opts.multishot_recv)
		refuse("--link-timeout applies to single-shot receives; it cannot be combined with --multishot-recv");
	if (opts.hardlink && opts.link_timeout_ms <= 0)
		refuse("--hardlink links the receive to its timeout; it needs --link-timeout");
	if (opts.granule > 0 && opts.rings < 2)
		refuse("--granule routes connections between rings; it needs --rings 2 or more");
	if (opts.attach_wq && opts.rings < 2)
		refuse("--attach-wq shares one io-wq between rings; it needs --rings 2 or more");
	if (opts.poll_first && (opts.buf_ring || opts.buf_select || opts.multishot_recv))
		refuse("--poll-first receives into each connection's own buffer; it cannot be combined with "
		       "--buf-ring, --buf-select or --multishot-recv");
	if (opts.poll_first && (opts.async || opts.drain || opts.link_timeout_ms > 0 || opts.send_zc))
		refuse("--poll-first completes every receive and send in its submission; it cannot be combined "
		       "with --async, --drain, --link-timeout or --send-zc");
	if (opts.buf_count == 0 || (opts.buf_count & (opts.buf_count - 1)) || opts.buf_count > 32768)
		refuse("--buf-count must be a power of two up to 32768");
	if (opts.recv_bundle && !opts.buf_ring)
		refuse("--recv-bundle takes several buffers from a buffer ring: add --buf-ring");
	if (opts.buf_inc && !opts.buf_ring)
		refuse("--buf-inc is a kind of buffer ring: add --buf-ring");
	if (opts.zc_fixed && !opts.send_zc)
		refuse("--zc-fixed registers the buffers zero-copy sends go out from: add --send-zc");
	if (opts.zc_fixed && !opts.buf_ring && !opts.buf_select)
		refuse("--zc-fixed registers the provided buffers: add --buf-ring or --buf-select");
	if (opts.send_bundle && (opts.send_zc || opts.gather_send || opts.poll_first))
		refuse("--send-bundle sends from a buffer ring per connection; it cannot be combined with "
		       "--send-zc, --gather-send or --poll-first");
	if (opts.gather_send && opts.send_zc)
		refuse("--gather-send with --send-zc is not built: it would need IORING_OP_SENDMSG_ZC; choose one");
	if (opts.wait_nr > 1 && !opts.min_wait_us)
		refuse("--wait-nr above 1 would wait for that many completions however long they take; "
		       "add --min-wait USEC");
}

static void setup_ring(struct uring_ctx *r)
{
	struct ring_setup rs = opts.ring;
	char why[256];
	unsigned features;
	int ret;

	if (opts.attach_wq && r->idx > 0)
		rs.attach_wq_fd = rings[0].ring.ring_fd;
	if (opts.reg_wait) {
		long page = sysconf(_SC_PAGESIZE);

		if (page <= 0 || posix_memalign((void **)&r->wait_region, (size_t)page, (size_t)page) != 0)
			die("allocating a wait region", ENOMEM);
		memset(r->wait_region, 0, (size_t)page);
		/* Ring 0 wakes every STOP_CHECK_MS to look for a stop signal. */
		if (r->idx == 0) {
			r->wait_region->ts.tv_nsec = STOP_CHECK_MS * 1000000L;
			r->wait_region->flags = IOLAB_REG_WAIT_TS;
		}
		r->wait_region->min_wait_usec = opts.min_wait_us;
		rs.wait_region = r->wait_region;
		rs.wait_region_size = (size_t)page;
	}
	if (ring_setup_init(&rs, &r->ring, &features, why, sizeof(why)) < 0)
		refuse(why);
	if (!(features & IORING_FEAT_FAST_POLL))
		refuse("this kernel lacks IORING_FEAT_FAST_POLL, which the server requires (Linux 5.7+)");
	if (opts.recv_bundle && !(features & IORING_FEAT_RECVSEND_BUNDLE))
		refuse("unavailable: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE (--recv-bundle needs Linux 6.10+)");
	if (opts.send_bundle && !(features & IORING_FEAT_RECVSEND_BUNDLE))
		refuse("unavailable: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE (--send-bundle needs Linux 6.10+)");
	if (opts.send_bundle) {
		/* Each connection's send ring is incremental: try one first. */
		struct io_uring_buf_ring *probe;

		if (posix_memalign((void **)&probe, 4096, sizeof(struct io_uring_buf)) != 0)
			die("allocating a probe buffer ring", ENOMEM);
		ret = register_buf_ring(r, probe, 1, 65535, 1);
		if (ret < 0) {
			snprintf(why, sizeof(why), "unavailable: this kernel refused an incremental send buffer ring "
				 "(IOU_PBUF_RING_INC; --send-bundle needs Linux 6.12+): %s", strerror(-ret));
			refuse(why);
		}
		io_uring_unregister_buf_ring(&r->ring, 65535);
		free(probe);
	}
	if (opts.min_wait_us && !(features & IORING_FEAT_MIN_TIMEOUT))
		refuse("unavailable: this kernel lacks IORING_FEAT_MIN_TIMEOUT (--min-wait needs Linux 6.12+)");
	if (opts.fixed_files) {
		ret = io_uring_register_files_sparse(&r->ring, (unsigned)nconns);
		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering a %zu-slot file table: %s\n", nconns,
				strerror(-ret));
			exit(2);
		}
	}
	if (opts.send_zc) {
		struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
		int ok = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);

		io_uring_free_probe(probe);
		if (!ok)
			refuse("unavailable: this kernel lacks IORING_OP_SEND_ZC (--send-zc)");
	}
	if (iowq_set) {
		ret = io_uring_register_iowq_aff(&r->ring, iowq_setsize, iowq_set);
		if (ret < 0) {
			fprintf(stderr, PROG ": --iowq-aff %s: kernel refused IORING_REGISTER_IOWQ_AFF: %s\n",
				opts.iowq_aff, strerror(-ret));
			exit(2);
		}
	}
	if (opts.napi_us) {
		struct iolab_uring_napi napi = { .busy_poll_to = opts.napi_us, .prefer_busy_poll = 1 };

		if (syscall(__NR_io_uring_register, r->ring.ring_fd, IOLAB_REGISTER_NAPI, &napi, 1) < 0) {
			char line[200];

			snprintf(line, sizeof(line),
				 "unavailable: this kernel refused IORING_REGISTER_NAPI (--napi needs Linux 6.9+ "
				 "built with CONFIG_NET_RX_BUSY_POLL): %s", strerror(errno));
			refuse(line);
		}
	}
	setup_buffers(r);
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

/* "2-3,6" (taskset -c style) into iowq_set, sized for its largest CPU. */
static void parse_iowq_aff(const char *text)
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
	CPU_FREE(iowq_set);   /* the flag given again: the last list counts */
	iowq_set = CPU_ALLOC((int)max + 1);
	if (!iowq_set)
		die("allocating a CPU set", ENOMEM);
	iowq_setsize = CPU_ALLOC_SIZE((int)max + 1);
	CPU_ZERO_S(iowq_setsize, iowq_set);
	for (p = text; *p && next_cpu_range(&p, &lo, &hi) == 0;)
		for (long c = lo; c <= hi; c++)
			CPU_SET_S((size_t)c, iowq_setsize, iowq_set);
	opts.iowq_aff = text;
}

static int iowq_workers(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "iou-wrk", 7) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [OPTIONS]\n"
		"\n"
		"TCP echo server on io_uring (liburing %s). Prints one JSON line of counters\n"
		"and exits 0 on SIGTERM or SIGINT. Refused flag combinations exit 2 with the\n"
		"reason; a port already in use exits 3.\n"
		"\n"
		"  --port P             TCP port (required; 0 picks one, reported on stderr)\n"
		"  --bind ADDR          IPv4 address to bind (default 127.0.0.1)\n"
		"Ring setup:\n"
		"  --entries N          SQ entries (default 1024)\n"
		"  --cq-size N          CQ entries (IORING_SETUP_CQSIZE)\n"
		"  --clamp              clamp sizes to the kernel maximum (IORING_SETUP_CLAMP)\n"
		"  --sqpoll             kernel submission thread (IORING_SETUP_SQPOLL)\n"
		"  --sq-thread-idle MS  SQPOLL thread idle time before it sleeps (default 1000)\n"
		"  --sq-aff CPU         pin the SQPOLL thread (IORING_SETUP_SQ_AFF)\n"
		"  --attach-wq          rings share ring 0's io-wq (IORING_SETUP_ATTACH_WQ)\n"
		"  --iowq-aff CPUS      CPUs (a list such as 2-3,6) io-wq workers run on\n"
		"                       (IORING_REGISTER_IOWQ_AFF); by default they inherit\n"
		"                       the server's own CPU affinity\n"
		"  --r-disabled         create rings disabled, then enable them (IORING_SETUP_R_DISABLED)\n"
		"  --coop-taskrun       IORING_SETUP_COOP_TASKRUN\n"
		"  --taskrun-flag       IORING_SETUP_TASKRUN_FLAG\n"
		"  --single-issuer      IORING_SETUP_SINGLE_ISSUER\n"
		"  --defer-taskrun      IORING_SETUP_DEFER_TASKRUN (needs --single-issuer)\n"
		"  --register-ring-fd   io_uring_register_ring_fd\n"
		"Per-SQE flags and modes:\n"
		"  --async              IOSQE_ASYNC on receives and sends (work goes to io-wq)\n"
		"  --buf-select         legacy provided buffers (IORING_OP_PROVIDE_BUFFERS)\n"
		"  --buf-ring           ring-mapped provided buffers (io_uring_register_buf_ring)\n"
		"  --buf-size BYTES     receive buffer size (default 4096)\n"
		"  --buf-count N        provided buffers per ring, a power of two (default 4096)\n"
		"  --hold-share PCT     the share of a ring's provided buffers its connections may\n"
		"                       keep queued together, 1-100 (default 50): each holds at\n"
		"                       most PCT %% / its open connections and copies the rest,\n"
		"                       so clients that stop reading cannot starve the others;\n"
		"                       0: no cap (a bundle may take what the ring has)\n"
		"  --fixed-files        registered file descriptors (IOSQE_FIXED_FILE)\n"
		"  --link-timeout MS    IOSQE_IO_LINK + IORING_OP_LINK_TIMEOUT on each receive;\n"
		"                       an idle connection's receive is re-armed when it fires\n"
		"  --hardlink           use IOSQE_IO_HARDLINK for that link\n"
		"  --drain              IOSQE_IO_DRAIN on receives and sends. This stalls by\n"
		"                       design: every SQE waits for all earlier ones, including\n"
		"                       the pending accept and other connections' receives,\n"
		"                       so an echo goes out only once those complete\n"
		"Operations:\n"
		"  --multishot-accept   one multishot accept\n"
		"  --multishot-recv     multishot receive (needs --buf-ring or --buf-select)\n"
		"  --send-zc            zero-copy send (IORING_OP_SEND_ZC)\n"
		"  --reg-wait           each wait reads its argument (timeout, --min-wait) from a\n"
		"                       region registered at setup (IORING_REGISTER_MEM_REGION,\n"
		"                       IORING_ENTER_EXT_ARG_REG, Linux 6.13) instead of one the\n"
		"                       kernel copies in per wait\n"
		"  --zc-fixed           zero-copy sends of received data go out from the provided\n"
		"                       buffers, registered as one fixed buffer\n"
		"                       (IORING_RECVSEND_FIXED_BUF; needs --send-zc and --buf-ring\n"
		"                       or --buf-select). Every zero-copy send asks for a usage\n"
		"                       report (Linux 6.2+): the final line counts zc_copied\n"
		"                       (loopback copies every send)\n"
		"  --wait-nr N          each wait asks for N completions (default 1); above 1\n"
		"                       needs --min-wait\n"
		"  --recv-bundle        receive bundles: one completion for as many provided\n"
		"                       buffers as the data fills (IORING_RECVSEND_BUNDLE,\n"
		"                       Linux 6.10; needs --buf-ring)\n"
		"  --buf-inc            incremental buffer ring: completions use a buffer a\n"
		"                       message at a time (IOU_PBUF_RING_INC, Linux 6.12;\n"
		"                       needs --buf-ring; use a large --buf-size; with\n"
		"                       --recv-bundle a completion spans several buffers,\n"
		"                       from where the last left the first)\n"
		"  --gather-send        one SENDMSG for every chunk queued on a connection (up\n"
		"                       to IOV_MAX), not a SEND per chunk: with --recv-bundle a\n"
		"                       bundle goes back in one send\n"
		"  --send-bundle        send bundles: each connection's queued chunks go into a\n"
		"                       send buffer ring of its own (256 entries, incremental),\n"
		"                       sent by one SEND with IORING_RECVSEND_BUNDLE until it is\n"
		"                       empty (Linux 6.12+; descriptors from 65534 send plainly)\n"
		"  --min-wait USEC      batched waits (IORING_ENTER_EXT_ARG min_wait_usec, Linux\n"
		"                       6.12+): a wait returns after USEC with the completions\n"
		"                       that arrived, at least one, or at once with N of them\n"
		"  --napi USEC          NAPI busy polling: each wait polls the NAPI instances of\n"
		"                       the ring's sockets for up to USEC (IORING_REGISTER_NAPI,\n"
		"                       Linux 6.9); the final line counts connections that had\n"
		"                       a NAPI id (none on loopback or veth: inert there)\n"
		"  --poll-first         a multishot poll per connection; on readiness a RECV, and\n"
		"                       every SEND, with MSG_DONTWAIT, so each completes inside\n"
		"                       the io_uring_enter that submits it (no task work, no\n"
		"                       io-wq), as the OpenAnolis study's server\n"
		"Rings:\n"
		"  --rings N            one ring per thread (default 1)\n"
		"  --granule G          ring 0 accepts; fd goes to ring (fd / G) %% N\n"
		"  -h, --help           show this help\n",
		IOLAB_LIBURING_VERSION);
}

/* Options into `opts`, checked; --help and bad options exit here. */
static void parse_args(int argc, char **argv)
{
	enum {
		OPT_PORT = 256, OPT_BIND, OPT_ENTRIES, OPT_CQ, OPT_CLAMP, OPT_SQPOLL, OPT_IDLE, OPT_AFF, OPT_ATTACH,
		OPT_RDIS, OPT_COOP, OPT_TRF, OPT_SI, OPT_DEFER, OPT_REGFD, OPT_ASYNC, OPT_BSEL, OPT_BRING, OPT_BSIZE,
		OPT_BCOUNT, OPT_FIXED, OPT_LT, OPT_HARD, OPT_DRAIN, OPT_MSA, OPT_MSR, OPT_ZC, OPT_RINGS, OPT_GRAN,
		OPT_IOWQ_AFF, OPT_POLL_FIRST, OPT_WAIT_NR, OPT_MIN_WAIT, OPT_RECV_BUNDLE, OPT_BUF_INC, OPT_GATHER_SEND, OPT_SEND_BUNDLE,
		OPT_NAPI, OPT_ZC_FIXED, OPT_REG_WAIT, OPT_HOLD,
	};
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, OPT_PORT }, { "bind", required_argument, NULL, OPT_BIND },
		{ "entries", required_argument, NULL, OPT_ENTRIES }, { "cq-size", required_argument, NULL, OPT_CQ },
		{ "clamp", no_argument, NULL, OPT_CLAMP }, { "sqpoll", no_argument, NULL, OPT_SQPOLL },
		{ "sq-thread-idle", required_argument, NULL, OPT_IDLE }, { "sq-aff", required_argument, NULL, OPT_AFF },
		{ "attach-wq", no_argument, NULL, OPT_ATTACH }, { "r-disabled", no_argument, NULL, OPT_RDIS },
		{ "coop-taskrun", no_argument, NULL, OPT_COOP }, { "taskrun-flag", no_argument, NULL, OPT_TRF },
		{ "single-issuer", no_argument, NULL, OPT_SI }, { "defer-taskrun", no_argument, NULL, OPT_DEFER },
		{ "register-ring-fd", no_argument, NULL, OPT_REGFD }, { "async", no_argument, NULL, OPT_ASYNC },
		{ "buf-select", no_argument, NULL, OPT_BSEL }, { "buf-ring", no_argument, NULL, OPT_BRING },
		{ "buf-size", required_argument, NULL, OPT_BSIZE }, { "buf-count", required_argument, NULL, OPT_BCOUNT },
		{ "hold-share", required_argument, NULL, OPT_HOLD },
		{ "fixed-files", no_argument, NULL, OPT_FIXED }, { "link-timeout", required_argument, NULL, OPT_LT },
		{ "hardlink", no_argument, NULL, OPT_HARD }, { "drain", no_argument, NULL, OPT_DRAIN },
		{ "multishot-accept", no_argument, NULL, OPT_MSA }, { "multishot-recv", no_argument, NULL, OPT_MSR },
		{ "send-zc", no_argument, NULL, OPT_ZC }, { "rings", required_argument, NULL, OPT_RINGS },
		{ "granule", required_argument, NULL, OPT_GRAN }, { "iowq-aff", required_argument, NULL, OPT_IOWQ_AFF },
		{ "poll-first", no_argument, NULL, OPT_POLL_FIRST },
		{ "wait-nr", required_argument, NULL, OPT_WAIT_NR }, { "min-wait", required_argument, NULL, OPT_MIN_WAIT },
		{ "recv-bundle", no_argument, NULL, OPT_RECV_BUNDLE }, { "buf-inc", no_argument, NULL, OPT_BUF_INC },
		{ "gather-send", no_argument, NULL, OPT_GATHER_SEND }, { "send-bundle", no_argument, NULL, OPT_SEND_BUNDLE }, { "napi", required_argument, NULL, OPT_NAPI },
		{ "zc-fixed", no_argument, NULL, OPT_ZC_FIXED }, { "reg-wait", no_argument, NULL, OPT_REG_WAIT },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_PORT: opts.port = (int)parse_int_flag(PROG, "--port", optarg, 0, 65535); break;
		case OPT_BIND: opts.bind = optarg; break;
		case OPT_ENTRIES: opts.ring.entries = (unsigned)parse_int_flag(PROG, "--entries", optarg, 1, 32768); break;
		case OPT_CQ: opts.ring.cq_size = (unsigned)parse_int_flag(PROG, "--cq-size", optarg, 1, 1 << 20); break;
		case OPT_CLAMP: opts.ring.clamp = 1; break;
		case OPT_SQPOLL: opts.ring.sqpoll = 1; break;
		case OPT_IDLE:
			opts.ring.sq_thread_idle = (int)parse_int_flag(PROG, "--sq-thread-idle", optarg, 0, 3600000);
			break;
		case OPT_AFF: opts.ring.sq_aff = (int)parse_int_flag(PROG, "--sq-aff", optarg, 0, 4095); break;
		case OPT_ATTACH: opts.attach_wq = 1; break;
		case OPT_IOWQ_AFF: parse_iowq_aff(optarg); break;
		case OPT_RDIS: opts.ring.r_disabled = 1; break;
		case OPT_COOP: opts.ring.coop_taskrun = 1; break;
		case OPT_TRF: opts.ring.taskrun_flag = 1; break;
		case OPT_SI: opts.ring.single_issuer = 1; break;
		case OPT_DEFER: opts.ring.defer_taskrun = 1; break;
		case OPT_REGFD: opts.ring.register_ring_fd = 1; break;
		case OPT_ASYNC: opts.async = 1; break;
		case OPT_BSEL: opts.buf_select = 1; break;
		case OPT_BRING: opts.buf_ring = 1; break;
		case OPT_BSIZE: opts.buf_size = (unsigned)parse_int_flag(PROG, "--buf-size", optarg, 1, 1 << 20); break;
		case OPT_BCOUNT: opts.buf_count = (unsigned)parse_int_flag(PROG, "--buf-count", optarg, 1, 32768); break;
		case OPT_HOLD: opts.hold_pct = (unsigned)parse_int_flag(PROG, "--hold-share", optarg, 0, 100); break;
		case OPT_FIXED: opts.fixed_files = 1; break;
		case OPT_LT: opts.link_timeout_ms = (int)parse_int_flag(PROG, "--link-timeout", optarg, 1, 3600000); break;
		case OPT_HARD: opts.hardlink = 1; break;
		case OPT_DRAIN: opts.drain = 1; break;
		case OPT_MSA: opts.multishot_accept = 1; break;
		case OPT_MSR: opts.multishot_recv = 1; break;
		case OPT_ZC: opts.send_zc = 1; break;
		case OPT_POLL_FIRST: opts.poll_first = 1; break;
		case OPT_WAIT_NR: opts.wait_nr = (unsigned)parse_int_flag(PROG, "--wait-nr", optarg, 1, 1 << 20); break;
		case OPT_MIN_WAIT:
			opts.min_wait_us = (unsigned)parse_int_flag(PROG, "--min-wait", optarg, 1, 10000000);
			break;
		case OPT_RECV_BUNDLE: opts.recv_bundle = 1; break;
		case OPT_BUF_INC: opts.buf_inc = 1; break;
		case OPT_GATHER_SEND: opts.gather_send = 1; break;
		case OPT_SEND_BUNDLE: opts.send_bundle = 1; break;
		case OPT_ZC_FIXED: opts.zc_fixed = 1; break;
		case OPT_REG_WAIT: opts.reg_wait = 1; break;
		case OPT_NAPI: opts.napi_us = (unsigned)parse_int_flag(PROG, "--napi", optarg, 1, 10000000); break;
		case OPT_RINGS: opts.rings = (int)parse_int_flag(PROG, "--rings", optarg, 1, 1024); break;
		case OPT_GRAN: opts.granule = (int)parse_int_flag(PROG, "--granule", optarg, 1, 1 << 20); break;
		case 'h': usage(stdout); exit(0);
		default: fprintf(stderr, PROG ": bad option; see --help\n"); exit(2);
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
	require_flag(PROG, opts.port >= 0, "--port");
	check_combinations();
	link_ts.tv_sec = opts.link_timeout_ms / 1000;
	link_ts.tv_nsec = (long long)(opts.link_timeout_ms % 1000) * 1000000;
}

/* Block the stop signals before any thread starts (threads inherit the
 * mask); ring 0 reads them from a signalfd. */
static void block_stop_signals(void)
{
	sigset_t stop;
	int err;

	install_stop_handlers();   /* SIGPIPE ignored */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	if ((err = pthread_sigmask(SIG_BLOCK, &stop, NULL)) != 0)
		die("pthread_sigmask", err);
	stop_fd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
	if (stop_fd < 0)
		die("signalfd", errno);
}

/* Every ring with its connection table, listener (one per ring, or ring 0's
 * only with --granule) and ring setup. */
static void open_rings(void)
{
	nconns = raise_nofile(PROG);
	rings = calloc((size_t)opts.rings, sizeof(*rings));
	if (!rings)
		die("allocating the rings", ENOMEM);
	for (int i = 0; i < opts.rings; i++) {
		struct uring_ctx *r = &rings[i];

		r->idx = i;
		r->listen_fd = -1;
		r->conns = calloc(nconns, sizeof(*r->conns));
		r->starved = calloc(nconns, sizeof(*r->starved));
		if (!r->conns || !r->starved) {
			fprintf(stderr, PROG ": out of memory for %zu connections per ring\n", nconns);
			exit(1);
		}
		if (i == 0 || opts.granule == 0) {
			r->listen_fd = listen_tcp(PROG, opts.bind, opts.port, opts.rings > 1, 0);
			if (opts.port == 0) {
				struct sockaddr_in a;
				socklen_t al = sizeof(a);

				if (getsockname(r->listen_fd, (struct sockaddr *)&a, &al) != 0)
					die("getsockname", errno);
				opts.port = ntohs(a.sin_port);
			}
		}
		setup_ring(r);
	}
}

/* Close what the rings still hold: open connections, their queued chunks, the rings. */
static void close_rings(void)
{
	for (int i = 0; i < opts.rings; i++) {
		struct uconn *conns = rings[i].conns;

		for (size_t fd = 0; fd < nconns; fd++) {
			if (!conns[fd].open)
				continue;
			while (conns[fd].head) {
				struct chunk *ch = conns[fd].head;

				conns[fd].head = ch->next;
				if (ch->bid == COPIED)
					free(ch->data);
				free(ch);
			}
			free(conns[fd].buf);
			free(conns[fd].gather);
			close((int)fd);
		}
	}
	for (int i = 0; i < opts.rings; i++) {
		io_uring_queue_exit(&rings[i].ring);
		/* The send rings (--send-bundle) once the kernel let go of them. */
		for (size_t fd = 0; fd < nconns; fd++)
			if (rings[i].conns[fd].open)
				free(rings[i].conns[fd].send_br);
		if (rings[i].listen_fd >= 0)
			close(rings[i].listen_fd);
		free(rings[i].bufs);
		free(rings[i].br);
		free(rings[i].slot_bid);
		free(rings[i].pos_of_bid);
		free(rings[i].bundle_bids);
		free(rings[i].inc_used);
		free(rings[i].inc_refs);
		free(rings[i].inc_retired);
		free(rings[i].wait_region);   /* the ring that pinned it is gone */
		free(rings[i].starved);
		free(rings[i].conns);
	}
	free(rings);
}

/* The counters summed over rings, with the configuration that ran. */
static void print_counters(int iowq)
{
	struct echo_counters total = { 0 };
	char *config;

	for (int i = 0; i < opts.rings; i++)
		counters_add(&total, &rings[i].c);
	if (asprintf(&config,
		 "{\"bind\": \"%s\", \"port\": %d, \"entries\": %u, \"cq_size\": %u, \"clamp\": %d, "
		 "\"sqpoll\": %d, \"sq_thread_idle\": %d, \"sq_aff\": %d, \"attach_wq\": %d, "
		 "\"r_disabled\": %d, \"coop_taskrun\": %d, \"taskrun_flag\": %d, \"single_issuer\": %d, "
		 "\"defer_taskrun\": %d, \"register_ring_fd\": %d, \"async\": %d, \"buf_select\": %d, "
		 "\"buf_ring\": %d, \"buf_size\": %u, \"buf_count\": %u, \"hold_pct\": %u, \"fixed_files\": %d, "
		 "\"link_timeout_ms\": %d, \"hardlink\": %d, \"drain\": %d, \"multishot_accept\": %d, "
		 "\"multishot_recv\": %d, \"send_zc\": %d, \"poll_first\": %d, \"rings\": %d, \"granule\": %d, "
		 "\"wait_nr\": %u, \"min_wait_us\": %u, \"recv_bundle\": %d, \"buf_inc\": %d, \"gather_send\": %d, \"send_bundle\": %d, "
		 "\"napi_us\": %u, \"zc_fixed\": %d, \"reg_wait\": %d, \"iowq_aff\": \"%s\", \"iowq_workers_at_exit\": %d, \"liburing\": \"%s\"}",
		 opts.bind, opts.port, opts.ring.entries, opts.ring.cq_size, opts.ring.clamp, opts.ring.sqpoll,
		 opts.ring.sq_thread_idle, opts.ring.sq_aff, opts.attach_wq, opts.ring.r_disabled,
		 opts.ring.coop_taskrun, opts.ring.taskrun_flag, opts.ring.single_issuer, opts.ring.defer_taskrun,
		 opts.ring.register_ring_fd, opts.async, opts.buf_select, opts.buf_ring, opts.buf_size,
		 opts.buf_count, opts.hold_pct, opts.fixed_files, opts.link_timeout_ms, opts.hardlink, opts.drain, opts.multishot_accept,
		 opts.multishot_recv, opts.send_zc, opts.poll_first, opts.rings, opts.granule, opts.wait_nr,
		 opts.min_wait_us, opts.recv_bundle, opts.buf_inc, opts.gather_send, opts.send_bundle, opts.napi_us, opts.zc_fixed, opts.reg_wait, opts.iowq_aff,
		 iowq,
		 IOLAB_LIBURING_VERSION) < 0)
		die("formatting the counters", ENOMEM);
	print_final(stdout, "uring", &total, config);
	free(config);
}

int main(int argc, char **argv)
{
	int iowq;

	parse_args(argc, argv);
	block_stop_signals();
	open_rings();
	fprintf(stderr, PROG ": listening on %s:%d\n", opts.bind, opts.port);
	for (int i = 1; i < opts.rings; i++) {
		int err = pthread_create(&rings[i].thread, NULL, run_ring, &rings[i]);

		if (err != 0)
			die("pthread_create", err);
	}
	run_ring(&rings[0]);
	for (int i = 1; i < opts.rings; i++)
		pthread_join(rings[i].thread, NULL);
	close(stop_fd);
	iowq = iowq_workers();   /* before the rings (and their io-wq) go */
	print_counters(iowq);
	close_rings();
	CPU_FREE(iowq_set);
	return 0;
}
