/*
 * loadgen: a multi-threaded epoll load generator for TCP echo servers that
 * verifies every echoed byte.
 *
 * Each byte of a request is a function of (connection, sequence number,
 * offset), so a dropped, duplicated, reordered or corrupted byte is caught
 * wherever it lands. Closed loop by default (--pipeline requests in flight
 * per connection); --rate R sends open loop at R requests/s in total, with
 * latency measured from the scheduled send time (no coordinated omission).
 * Connections are all established before the clock starts, and each has
 * its first request (request 0) echoed: a server that takes connections on
 * slowly holds every one asked for when the clock starts (--no-ramp-up
 * skips it). --warmup seconds follow, then --duration seconds are measured.
 *
 * --model thread-per-connection drives the server as rust_echo_bench (the
 * sources' client) does: one thread per connection on a blocking socket,
 * writing the whole request, then reading the whole echo, closed loop. Its
 * requests arrive at the server one per wake-up of each thread rather than
 * in event-loop batches, so a claim is measured with its source's client.
 *
 * --model event-loop-uring runs the event loop on io_uring instead of epoll
 * (loadgen_uring.c): a cheaper client, so that the server, not the client,
 * is what a run measures. --model auto takes it where the kernel allows
 * (Linux 6.1), else the epoll loop; --check prints the model a run would use
 * and exits, so a sweep resolves "auto" once and records what it measured.
 *
 * This file is the command line and the report; loadgen_core.c holds what
 * the client models share, loadgen_epoll.c, loadgen_uring.c and
 * loadgen_blocking.c the models.
 *
 * Prints one JSON line; --histogram FILE writes the raw latency buckets.
 * Exits 1 if any byte mismatched, a connection closed early, or a request
 * timed out, with the counts in the JSON line and one line on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>

#include "../common/cli.h"
#include "../common/raw_out.h"
#include "../common/timing.h"
#include "loadgen.h"
#include "server.h"

static const char *const MODEL_NAMES[] = {
	[MODEL_EVENT_LOOP] = "event-loop", [MODEL_URING_LOOP] = "event-loop-uring",
	[MODEL_THREAD_PER_CONNECTION] = "thread-per-connection", [MODEL_AUTO] = "auto",
};

static enum client_model model_named(const char *name)
{
	for (size_t m = 0; m < sizeof(MODEL_NAMES) / sizeof(MODEL_NAMES[0]); m++)
		if (strcmp(name, MODEL_NAMES[m]) == 0)
			return (enum client_model)m;
	fprintf(stderr, PROG ": --model %s: event-loop, event-loop-uring, thread-per-connection or auto\n", name);
	exit(2);
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " --port P [OPTIONS]\n"
		"\n"
		"Drives a TCP echo server and verifies every echoed byte.\n"
		"\n"
		"  --host ADDR         server IPv4 address (default 127.0.0.1)\n"
		"  --port P            server port (required)\n"
		"  --connections N     concurrent connections (default 50)\n"
		"  --bytes B           request size in bytes (default 128)\n"
		"  --duration S        measured seconds (default 10)\n"
		"  --warmup S          seconds after all connections are up and before\n"
		"                      measuring; not counted (default 2)\n"
		"  --no-ramp-up        start the clock once connected; by default each\n"
		"                      connection first has one request echoed (the\n"
		"                      ramp-up, not counted), within --timeout\n"
		"  --model M           event-loop (default: epoll, --threads loops),\n"
		"                      event-loop-uring (the same loops on io_uring:\n"
		"                      multishot receive into a buffer ring, DEFER_TASKRUN)\n"
		"                      or thread-per-connection (rust_echo_bench's: a\n"
		"                      blocking socket per thread, write the request, read\n"
		"                      the echo; closed-loop ping-pong only)\n"
		"                      or auto (event-loop-uring where the kernel allows,\n"
		"                      else event-loop)\n"
		"  --check             print the model this run would use, as JSON, and\n"
		"                      exit: 0, or 2 with the reason where it cannot run\n"
		"  --threads T         event-loop threads (default 1)\n"
		"  --pipeline D        requests in flight per connection, closed loop\n"
		"                      (default 1: ping-pong)\n"
		"  --rate R            open loop: R requests/s in total, latency from the\n"
		"                      scheduled send time (default: closed loop)\n"
		"  --timeout S         a request with no progress for S seconds fails\n"
		"                      the run (default 10)\n"
		"  --histogram FILE    write raw latency buckets: low_ns,high_ns,count\n"
		"  -h, --help          show this help\n"
		"\n"
		"Output: one JSON line with requests, rps, bytes_per_s, latency percentiles\n"
		"(p50/p99/p999/max, µs), errors, connections_answered (how many the server\n"
		"echoed on within the run: all were open at once), setup_s (first connect\n"
		"to the clock's start) and the load generator's own CPU time. Exit status\n"
		"1 on any mismatch, early close, timeout, failed connect, a connection\n"
		"with no answer in the ramp-up, or (event loops) one that sent in the\n"
		"run's first half and heard nothing back before its end;\n"
		"thread-per-connection reports those (connections_unanswered) without\n"
		"failing.\n");
}

/* A percentile for the JSON line: null when no request was measured. */
static const char *json_number(char *buf, size_t size, double v)
{
	if (isnan(v))
		return "null";
	snprintf(buf, size, "%.3f", v);
	return buf;
}

static uint64_t tv_ns(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

/* The options into o; --check's request into *check. Exits 2 on a bad flag. */
static void parse_options(int argc, char **argv, int *check, int *threads_given)
{
	enum { O_HOST = 256, O_PORT, O_CONN, O_BYTES, O_DUR, O_WARM, O_THREADS, O_PIPE, O_RATE, O_TIMEOUT, O_HIST,
	       O_MODEL, O_CHECK, O_NO_RAMP };
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, O_HOST }, { "port", required_argument, NULL, O_PORT },
		{ "connections", required_argument, NULL, O_CONN }, { "bytes", required_argument, NULL, O_BYTES },
		{ "duration", required_argument, NULL, O_DUR }, { "warmup", required_argument, NULL, O_WARM },
		{ "threads", required_argument, NULL, O_THREADS }, { "pipeline", required_argument, NULL, O_PIPE },
		{ "rate", required_argument, NULL, O_RATE }, { "timeout", required_argument, NULL, O_TIMEOUT },
		{ "histogram", required_argument, NULL, O_HIST }, { "model", required_argument, NULL, O_MODEL },
		{ "check", no_argument, NULL, O_CHECK }, { "no-ramp-up", no_argument, NULL, O_NO_RAMP },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case O_HOST: o.host = optarg; break;
		case O_PORT: o.port = (int)parse_int_flag(PROG, "--port", optarg, 1, 65535); break;
		case O_CONN: o.connections = (int)parse_int_flag(PROG, "--connections", optarg, 1, 1 << 20); break;
		case O_BYTES: o.bytes = parse_int_flag(PROG, "--bytes", optarg, 1, 1 << 26); break;
		case O_DUR: o.duration = parse_seconds_flag(PROG, "--duration", optarg); break;
		case O_WARM: o.warmup = parse_seconds_flag(PROG, "--warmup", optarg); break;
		case O_THREADS:
			o.threads = (int)parse_int_flag(PROG, "--threads", optarg, 1, 1024);
			*threads_given = 1;
			break;
		case O_MODEL: o.model = model_named(optarg); break;
		case O_PIPE: o.pipeline = (int)parse_int_flag(PROG, "--pipeline", optarg, 1, 1 << 16); break;
		case O_RATE: o.rate = parse_seconds_flag(PROG, "--rate", optarg); break;	/* requests/s */
		case O_TIMEOUT: o.timeout = parse_seconds_flag(PROG, "--timeout", optarg); break;
		case O_HIST: o.histogram = optarg; break;
		case O_CHECK: *check = 1; break;
		case O_NO_RAMP: o.ramp_up = 0; break;
		case 'h': usage(stdout); exit(0);
		default: fprintf(stderr, PROG ": bad option; see --help\n"); exit(2);
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
}

/* Resolve --model auto; refuse event-loop-uring where it cannot run. The
 * reason auto did not take the io_uring loop, or NULL. */
static const char *resolve_model(void)
{
	const char *why = NULL;

	if (o.model == MODEL_AUTO) {
		why = uring_loop_unavailable();   /* sets up a trial ring: once */
		o.model = why ? MODEL_EVENT_LOOP : MODEL_URING_LOOP;
	} else if (o.model == MODEL_URING_LOOP && (why = uring_loop_unavailable()) != NULL) {
		fprintf(stderr, PROG ": --model event-loop-uring: %s\n", why);
		exit(2);
	}
	return why;
}

/* --check: the model this run would use, with the reason for auto's choice
 * (the sweep's provenance records it). */
static void print_check(const char *auto_why)
{
	printf("{\"model\": \"%s\", \"uring_unavailable\": \"", MODEL_NAMES[o.model]);
	for (const char *c = auto_why ? auto_why : ""; *c; c++)
		printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
	printf("\"}\n");
}

/* The checks across flags, the server's address and the descriptor limit. */
/* Every connection goes from this host's one address to one server port,
 * so each needs a source port of its own from the local port range. */
static void check_port_range(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	long lo, hi;

	if (!f)
		return;   /* not Linux, or no procfs: connect() says it when ports run out */
	if (fscanf(f, "%ld %ld", &lo, &hi) == 2 && hi >= lo && o.connections > hi - lo + 1) {
		fprintf(stderr,
			PROG ": %d connections need as many source ports, and the local port range %ld-%ld gives "
			     "%ld; lower --connections or widen net.ipv4.ip_local_port_range\n",
			o.connections, lo, hi, hi - lo + 1);
		exit(2);
	}
	fclose(f);
}

static void check_run(int threads_given)
{
	require_flag(PROG, o.port >= 0, "--port");
	if (o.duration <= 0 || o.timeout <= 0) {
		fprintf(stderr, PROG ": --duration and --timeout must be positive\n");
		exit(2);
	}
	if (o.model == MODEL_THREAD_PER_CONNECTION) {
		if (o.pipeline != 1 || o.rate > 0 || threads_given) {
			fprintf(stderr, PROG ": --model thread-per-connection is closed-loop ping-pong with one thread "
				"per connection; drop --pipeline, --rate and --threads\n");
			exit(2);
		}
		o.threads = o.connections;
	}
	if (o.threads > o.connections)
		o.threads = o.connections;
	memset(&server_addr, 0, sizeof(server_addr));
	server_addr.sin_family = AF_INET;
	server_addr.sin_port = htons((uint16_t)o.port);
	if (inet_pton(AF_INET, o.host, &server_addr.sin_addr) != 1) {
		fprintf(stderr, PROG ": --host %s: not an IPv4 address\n", o.host);
		exit(2);
	}
	signal(SIGPIPE, SIG_IGN);
	check_port_range();
	if (raise_nofile(PROG) < (size_t)o.connections + 64) {
		fprintf(stderr, PROG ": RLIMIT_NOFILE's hard limit is below %d connections; raise it (ulimit -Hn)\n",
			o.connections);
		exit(2);
	}
}


/* Start o.threads threads of the chosen model, each with its share of the
 * connections; the thread-per-connection threads share one histogram. */
static struct lthread *start_threads(_Atomic uint64_t **shared_hist, pthread_attr_t *attr)
{
	struct lthread *threads = calloc((size_t)o.threads, sizeof(*threads));
	void *(*run)(void *) = o.model == MODEL_THREAD_PER_CONNECTION ? run_blocking_connection
			       : o.model == MODEL_URING_LOOP ? run_uring_thread : run_epoll_thread;

	if (!threads)
		fail_setup("calloc");
	*shared_hist = NULL;
	if (o.model == MODEL_THREAD_PER_CONNECTION && !(*shared_hist = calloc(NBUCKETS, sizeof(**shared_hist))))
		fail_setup("calloc");
	errno = pthread_attr_init(attr);
	if (errno)
		fail_setup("pthread_attr_init");
	/* Thousands of blocking threads each need little stack. */
	if (o.model == MODEL_THREAD_PER_CONNECTION && (errno = pthread_attr_setstacksize(attr, 256 * 1024)) != 0)
		fail_setup("pthread_attr_setstacksize");
	for (int i = 0, next = 0; i < o.threads; i++) {
		struct lthread *t = &threads[i];

		t->idx = i;
		t->hist = *shared_hist ? *shared_hist : calloc(NBUCKETS, sizeof(*t->hist));
		if (!t->hist)
			fail_setup("calloc");
		t->nconn = o.connections / o.threads + (i < o.connections % o.threads);
		t->conns = calloc((size_t)t->nconn, sizeof(*t->conns));
		if (!t->conns)
			fail_setup("calloc");
		for (int k = 0; k < t->nconn; k++) {
			t->conns[k].id = next++;
			t->conns[k].fd = -1;
		}
		errno = pthread_create(&t->thread, attr, run, t);
		if (errno) {
			fprintf(stderr, PROG ": starting thread %d of %d: %s (ulimit -u, or fewer --connections "
				"with one thread per connection)\n", i + 1, o.threads, strerror(errno));
			exit(2);
		}
	}
	return threads;
}

/* Every thread's counts and latency buckets, summed. */
struct totals {
	uint64_t hist[NBUCKETS], requests, bytes, mismatches, short_closes, timeouts, connect_errors;
	uint64_t unanswered_at_start;
	/* Connections the server echoed a byte on within the run, and those
	 * that waited for one (waited_unanswered). Every connection is opened
	 * before the clock starts and held to the end, so with no early close
	 * `answered` is how many the server served at once; an unanswered one
	 * it left unaccepted (out of descriptors, say) or never served. */
	int answered, unanswered;
	double max_us;
};

/* c sent its first request in the run's first half and heard nothing back
 * before the end: far longer than any answered request takes. (An open-loop
 * connection first due late in the run is not judged.) */
static int waited_unanswered(const struct lconn *c)
{
	return c->first_sent_ns && c->first_sent_ns - t_start_ns <= (t_end_ns - t_start_ns) / 2;
}

static void sum_threads(const struct lthread *threads, int shared, struct totals *s)
{
	memset(s, 0, sizeof(*s));
	for (int i = 0; i < o.threads; i++) {
		const struct lthread *t = &threads[i];

		s->requests += t->requests;
		s->bytes += t->bytes;
		s->mismatches += t->mismatches;
		s->short_closes += t->short_closes;
		s->timeouts += t->timeouts;
		s->connect_errors += t->connect_errors;
		s->unanswered_at_start += t->unanswered_at_start;
		for (int k = 0; k < t->nconn; k++)
			if (t->conns[k].answered)
				s->answered++;
			else if (waited_unanswered(&t->conns[k]))
				s->unanswered++;
		if (!shared || i == 0)
			for (unsigned b = 0; b < NBUCKETS; b++)
				s->hist[b] += atomic_load_explicit(&t->hist[b], memory_order_relaxed);
	}
	for (unsigned b = 0; b < NBUCKETS; b++)
		if (s->hist[b]) {
			uint64_t lo, hi;

			bucket_range(b, &lo, &hi);
			s->max_us = (double)hi / 1000.0;
		}
}

/* --histogram FILE: the non-empty buckets, low_ns,high_ns,count. */
static int write_histogram(const struct totals *s)
{
	struct raw_out f;

	if (raw_open(&f, o.histogram)) {
		fprintf(stderr, PROG ": --histogram %s: %s\n", o.histogram, strerror(f.err));
		return -1;
	}
	raw_printf(&f, "low_ns,high_ns,count\n");
	for (unsigned b = 0; b < NBUCKETS; b++)
		if (s->hist[b]) {
			uint64_t lo, hi;

			bucket_range(b, &lo, &hi);
			raw_printf(&f, "%llu,%llu,%llu\n", (unsigned long long)lo, (unsigned long long)hi,
				   (unsigned long long)s->hist[b]);
		}
	return raw_close(&f, PROG) ? -1 : 0;
}

/* The run's JSON line; setup_s: from the first connect to the clock's
 * start (connecting, and the ramp-up). */
static void print_report(const struct totals *s, double setup_s)
{
	struct rusage ru;
	double secs = o.duration;
	char p50[32], p99[32], p999[32];

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
	printf("{\"requests\": %llu, \"bytes\": %llu, \"duration_s\": %.3f, \"rps\": %.1f, "
	       "\"bytes_per_s\": %.1f, \"p50_us\": %s, \"p99_us\": %s, \"p999_us\": %s, "
	       "\"max_us\": %.3f, \"mismatches\": %llu, \"short_closes\": %llu, \"timeouts\": %llu, "
	       "\"connect_errors\": %llu, \"client_user_cpu_ns\": %llu, \"client_sys_cpu_ns\": %llu, "
	       "\"connections\": %d, \"request_bytes\": %lld, \"pipeline\": %d, \"rate\": %.1f, "
	       "\"connections_answered\": %d, \"connections_unanswered\": %d, \"threads\": %d, \"warmup_s\": %.3f, \"model\": \"%s\", "
	       "\"ramp_up\": %s, \"connections_unanswered_at_start\": %llu, \"setup_s\": %.6f}\n",
	       (unsigned long long)s->requests, (unsigned long long)s->bytes, secs, (double)s->requests / secs,
	       (double)s->bytes / secs, json_number(p50, sizeof(p50), percentile(s->hist, s->requests, 0.5)),
	       json_number(p99, sizeof(p99), percentile(s->hist, s->requests, 0.99)),
	       json_number(p999, sizeof(p999), percentile(s->hist, s->requests, 0.999)), s->max_us,
	       (unsigned long long)s->mismatches, (unsigned long long)s->short_closes,
	       (unsigned long long)s->timeouts, (unsigned long long)s->connect_errors,
	       (unsigned long long)tv_ns(ru.ru_utime), (unsigned long long)tv_ns(ru.ru_stime),
	       o.connections, o.bytes, o.pipeline, o.rate, s->answered, s->unanswered, o.threads, o.warmup, MODEL_NAMES[o.model],
	       o.ramp_up ? "true" : "false", (unsigned long long)s->unanswered_at_start, setup_s);
	fflush(stdout);
}

/* Whether connections the server never answered fail the run: in the
 * event loops, which serve every connection in turn, they are the server's.
 * With a thread per connection on shared CPUs a thread woken by its echo
 * may simply not have run before the end: the client's own starvation,
 * which the sources' client (rust_echo_bench) did not check either. There
 * they are reported, not failed. */
static int unanswered_fail(const struct totals *s)
{
	return s->unanswered && o.model != MODEL_THREAD_PER_CONNECTION;
}

/* One line on stderr for a failed run, naming the first wrong byte. */
static void report_failure(const struct totals *s, const struct lthread *threads)
{
	fprintf(stderr, PROG ": FAILED: %llu mismatched bytes, %llu early closes, %llu timeouts, %llu failed connects",
		(unsigned long long)s->mismatches, (unsigned long long)s->short_closes,
		(unsigned long long)s->timeouts, (unsigned long long)s->connect_errors);
	for (int i = 0; i < o.threads; i++)
		if (threads[i].mismatches) {
			fprintf(stderr, " (first mismatch: connection %llu, request %llu, byte %lld)",
				(unsigned long long)threads[i].first_mismatch_conn,
				(unsigned long long)threads[i].first_mismatch_seq, threads[i].first_mismatch_off);
			break;
		}
	if (s->unanswered_at_start)
		fprintf(stderr, "; %llu of the %d connections had no answer to their first request within --timeout "
			"(%.1f s) before the clock started (the ramp-up): the server does not hold that many at once "
			"(check its descriptor limit and listen backlog, or ask for fewer)",
			(unsigned long long)s->unanswered_at_start, o.connections, o.timeout);
	/* After the ramp-up every connection still open had been answered once,
	 * so one left unanswered in the run was held and starved, not refused. */
	if (unanswered_fail(s))
		fprintf(stderr, "; the server answered %d of the %d connections asked for and never served "
			"%d that sent a request: %s", s->answered, o.connections, s->unanswered,
			o.ramp_up ? "it held them all at the start (each had one echo) and then left these "
				    "waiting for over half the run (an unfair server: a longer run, or fewer "
				    "connections)"
				  : "it did not hold them all at once (check its descriptor limit and listen "
				    "backlog, or ask for fewer)");
	fprintf(stderr, "\n");
}

int main(int argc, char **argv)
{
	struct lthread *threads;
	_Atomic uint64_t *shared_hist;
	pthread_attr_t attr;
	static struct totals s;   /* its histogram is large for a stack */
	const char *auto_why;
	int failed, check = 0, threads_given = 0;
	uint64_t setup_start_ns;

	parse_options(argc, argv, &check, &threads_given);
	auto_why = resolve_model();
	if (check) {
		print_check(auto_why);
		return 0;
	}
	check_run(threads_given);
	setup_start_ns = now_ns();
	threads = start_threads(&shared_hist, &attr);
	start_clock_when_all_ready();
	for (int i = 0; i < o.threads; i++)
		pthread_join(threads[i].thread, NULL);
	sum_threads(threads, shared_hist != NULL, &s);
	if (o.histogram && write_histogram(&s) != 0)
		return 2;
	print_report(&s, (double)(t_start_ns - setup_start_ns) / 1e9);
	failed = s.mismatches || s.short_closes || s.timeouts || s.connect_errors || s.unanswered_at_start ||
		 unanswered_fail(&s);
	if (failed)
		report_failure(&s, threads);
	else if (s.unanswered)
		fprintf(stderr, PROG ": note: %d of the %d connections sent a request and heard nothing back within "
			"the run (thread per connection: the server may have left them waiting, or their threads "
			"did not run); reported as connections_answered, not failed\n", s.unanswered, o.connections);
	for (int i = 0; i < o.threads; i++) {
		free(threads[i].conns);
		if (!shared_hist)
			free(threads[i].hist);
	}
	free(shared_hist);
	free(threads);
	pthread_attr_destroy(&attr);
	return failed ? 1 : 0;
}
