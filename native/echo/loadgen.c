/*
 * loadgen: a multi-threaded epoll load generator for TCP echo servers that
 * verifies every echoed byte.
 *
 * Each byte of a request is a function of (connection, sequence number,
 * offset), so a dropped, duplicated, reordered or corrupted byte is caught
 * wherever it lands. Closed loop by default (--pipeline requests in flight
 * per connection); --rate R sends open loop at R requests/s in total, with
 * latency measured from the scheduled send time (no coordinated omission).
 * Connections are all established before the clock starts; --warmup seconds
 * follow, then --duration seconds are measured.
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
 * Prints one JSON line; --histogram FILE writes the raw latency buckets.
 * Exits 1 if any byte mismatched, a connection closed early, or a request
 * timed out, with the counts in the JSON line and one line on stderr.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/raw_out.h"
#include "../common/timing.h"
#include "loadgen.h"
#include "server.h"

/* Log-linear histogram: 64 sub-buckets per power of two of nanoseconds, so
 * relative resolution is better than 2 % and absolute better than 1 µs
 * below 64 µs. */
#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define MAX_EXP 42
#define NBUCKETS ((MAX_EXP + 1) * SUB)

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

struct options o = {
	.host = "127.0.0.1", .port = -1, .connections = 50, .threads = 1, .pipeline = 1,
	.bytes = 128, .duration = 10, .warmup = 2, .rate = 0, .timeout = 10,
};
static struct sockaddr_in server;
uint64_t t_start_ns, t_measure_ns, t_end_ns;
/* The start line: threads count themselves ready and sleep until main sets
 * the clock. A condition variable, not polling: a thousand threads waking
 * every millisecond to look were a million wake-ups a second, which on 2
 * CPUs stretched a 1.5 s thread-per-connection run to 13 s (sys time 20 s). */
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t all_ready = PTHREAD_COND_INITIALIZER;      /* main waits on it */
static pthread_cond_t clock_started = PTHREAD_COND_INITIALIZER;  /* the threads wait on it */
static int ready_threads, clock_set;                             /* under start_lock */

/* Word `word` (8 bytes) of request `seq` on connection `conn`. Hashed a
 * word at a time, so generating and checking a request costs little beside
 * its two system calls: a client that does more work between them is more
 * often preempted half-way and pays a second context switch per request. */
static inline uint64_t payload_word(uint32_t conn, uint64_t seq, uint64_t word)
{
	uint64_t x = (seq + 1) * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)conn << 32) ^ (word * 0xBF58476D1CE4E5B9ULL);

	x ^= x >> 31;
	x *= 0x94D049BB133111EBULL;
	return x ^ (x >> 29);
}

/* Payload byte pos is byte pos & 7 of word pos >> 3, least significant
 * first. Whole words are written and compared 8 bytes at a time: byte by
 * byte, generating and checking 512 B took 0.76 us here, 15 % of what the
 * server spends on the request. */
static inline void put_word(uint8_t *p, uint64_t w)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	memcpy(p, &w, sizeof(w));
#else
	for (unsigned k = 0; k < 8; k++)
		p[k] = (uint8_t)(w >> (8 * k));
#endif
}

/* Payload bytes [off, off + len), one at a time: the partial words at either end. */
static void fill_bytes(uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len;) {
		uint64_t pos = off + i, w = payload_word(conn, seq, pos >> 3);

		for (unsigned k = (unsigned)(pos & 7); k < 8 && i < len; k++, i++)
			buf[i] = (uint8_t)(w >> (8 * k));
	}
}

/* How many bytes before the next word boundary, at most len. */
static size_t to_boundary(uint64_t off, size_t len)
{
	size_t head = (size_t)((8 - (off & 7)) & 7);

	return head < len ? head : len;
}

void fill_payload(uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len)
{
	size_t i = to_boundary(off, len);

	fill_bytes(buf, conn, seq, off, i);
	for (; i + 8 <= len; i += 8)
		put_word(buf + i, payload_word(conn, seq, (off + i) >> 3));
	fill_bytes(buf + i, conn, seq, off + i, len - i);
}

/* count_mismatches, one byte at a time; bad: the count so far. */
static uint64_t count_byte_mismatches(const uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len,
				      long long *first, uint64_t bad)
{
	for (size_t i = 0; i < len;) {
		uint64_t pos = off + i, w = payload_word(conn, seq, pos >> 3);

		for (unsigned k = (unsigned)(pos & 7); k < 8 && i < len; k++, i++)
			if (buf[i] != (uint8_t)(w >> (8 * k))) {
				if (!bad)
					*first = (long long)(off + i);
				bad++;
			}
	}
	return bad;
}

/* How many of buf[0, len) differ from payload bytes [off, off + len) of
 * request seq; *first gets the offset of the first that does. */
static uint64_t count_mismatches(const uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len,
				 long long *first)
{
	size_t i = to_boundary(off, len);
	uint64_t bad = count_byte_mismatches(buf, conn, seq, off, i, first, 0);

	for (; i + 8 <= len; i += 8) {
		uint8_t want[8];

		put_word(want, payload_word(conn, seq, (off + i) >> 3));
		if (memcmp(buf + i, want, sizeof(want)) != 0)
			bad = count_byte_mismatches(buf + i, conn, seq, off + i, 8, first, bad);
	}
	return count_byte_mismatches(buf + i, conn, seq, off + i, len - i, first, bad);
}

static unsigned bucket_of(uint64_t ns)
{
	unsigned exp;

	if (ns < SUB)
		return (unsigned)ns;
	exp = 63u - (unsigned)__builtin_clzll(ns);                 /* ns in [2^exp, 2^(exp+1)) */
	if (exp > MAX_EXP)
		return NBUCKETS - 1;
	return (exp - SUB_BITS + 1) * SUB + (unsigned)((ns >> (exp - SUB_BITS)) & (SUB - 1));
}

/* [low, high) of a bucket, in ns. */
static void bucket_range(unsigned b, uint64_t *low, uint64_t *high)
{
	unsigned group = b / SUB, sub = b % SUB;

	if (group == 0) {
		*low = sub;
		*high = sub + 1;
		return;
	}
	{
		unsigned exp = group + SUB_BITS - 1;
		uint64_t width = 1ull << (exp - SUB_BITS);

		*low = (1ull << exp) + sub * width;
		*high = *low + width;
	}
}

static void record_latency(struct lthread *t, uint64_t ns)
{
	atomic_fetch_add_explicit(&t->hist[bucket_of(ns)], 1, memory_order_relaxed);
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
		"(p50/p99/p999/max, µs), errors, and the load generator's own CPU time.\n"
		"Exit status 1 on any mismatch, early close or timeout.\n");
}

void fail_setup(const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(errno));
	exit(2);
}

int connect_one(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&server, sizeof(server)) != 0 || set_nodelay(fd) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

uint64_t due_interval_ns(void)
{
	/* Open loop: each connection sends every connections/rate seconds. */
	return o.rate > 0 ? (uint64_t)((double)o.connections / o.rate * 1e9) : 0;
}

static void watch(struct lthread *t, struct lconn *c, int out)
{
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0), .data.ptr = c };

	if (c->want_out == out)
		return;
	c->want_out = out;
	if (epoll_ctl(t->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0)
		fail_setup("epoll_ctl");
}

int may_send(const struct lconn *c, uint64_t now)
{
	if (now >= t_end_ns)
		return 0;
	if (o.rate > 0)
		return c->sent_off > 0 || now >= c->next_due_ns;
	return c->next_seq - c->done_seq < (uint64_t)o.pipeline;
}

static void grow_ring(struct lconn *c)
{
	size_t cap = c->ring * 2;
	uint64_t *n = calloc(cap, sizeof(*n));

	if (!n) {
		fprintf(stderr, PROG ": out of memory for outstanding requests\n");
		exit(2);
	}
	for (uint64_t s = c->done_seq; s < c->next_seq; s++)
		n[s & (cap - 1)] = c->start_ns[s & (c->ring - 1)];
	free(c->start_ns);
	c->start_ns = n;
	c->ring = cap;
}

int open_connection(struct lthread *t, struct lconn *c)
{
	c->fd = connect_one();
	if (c->fd < 0) {
		t->connect_errors++;
		c->dead = 1;
		return -1;
	}
	c->ring = 8;
	while (c->ring < (size_t)o.pipeline * 2)
		c->ring *= 2;
	c->start_ns = calloc(c->ring, sizeof(*c->start_ns));
	if (!c->start_ns)
		fail_setup("calloc");
	return 0;
}

void close_connections(struct lthread *t)
{
	for (int i = 0; i < t->nconn; i++) {
		if (t->conns[i].fd >= 0)
			close(t->conns[i].fd);
		free(t->conns[i].start_ns);
	}
}

void start_connection_clock(const struct lthread *t, struct lconn *c, int i)
{
	/* Spread open-loop start times so connections do not send in lockstep. */
	c->next_due_ns = t_start_ns + (uint64_t)((double)due_interval_ns() * (i * o.threads + t->idx) / o.connections);
	c->last_progress_ns = t_start_ns;
}

void begin_request(struct lconn *c, uint64_t now)
{
	if (c->next_seq - c->done_seq >= c->ring)
		grow_ring(c);
	/* Open loop: latency counts from when the request was due. */
	c->start_ns[c->next_seq & (c->ring - 1)] = o.rate > 0 ? c->next_due_ns : now;
}

void advance_sent(struct lconn *c, long long n)
{
	c->sent_off += n;
	if (c->sent_off == o.bytes) {
		c->sent_off = 0;
		c->next_seq++;
		if (o.rate > 0)
			c->next_due_ns += due_interval_ns();
	}
}

static void do_send(struct lthread *t, struct lconn *c, uint64_t now)
{
	uint8_t buf[16384];

	while (may_send(c, now)) {
		long long want = o.bytes - c->sent_off, chunk = want < (long long)sizeof(buf) ? want : (long long)sizeof(buf);
		ssize_t n;

		if (c->sent_off == 0)
			begin_request(c, now);
		fill_payload(buf, (uint32_t)c->id, c->next_seq, (uint64_t)c->sent_off, (size_t)chunk);
		n = send(c->fd, buf, (size_t)chunk, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				watch(t, c, 1);
				return;
			}
			if (errno == EINTR)
				continue;
			c->dead = 1;
			t->short_closes++;
			return;
		}
		advance_sent(c, n);
	}
	watch(t, c, 0);
}

/* Count `bad` mismatched bytes of request `seq`, remembering where the
 * run's first one was (`first`: its offset in the request). */
static void note_mismatches(struct lthread *t, struct lconn *c, uint64_t seq, uint64_t bad, long long first)
{
	if (bad && !t->mismatches) {
		t->first_mismatch_conn = (uint64_t)c->id;
		t->first_mismatch_seq = seq;
		t->first_mismatch_off = first;
	}
	t->mismatches += bad;
}

void consume_echo(struct lthread *t, struct lconn *c, const uint8_t *buf, size_t n, uint64_t now)
{
	c->last_progress_ns = now;
	for (size_t i = 0; i < n;) {
		long long left = o.bytes - c->recv_off, first = 0;
		size_t seg = n - i < (size_t)left ? n - i : (size_t)left;
		uint64_t bad;

		if (c->done_seq >= c->next_seq && c->sent_off == 0) {
			/* More bytes than we sent: the server duplicated data. */
			t->mismatches += (uint64_t)(n - i);
			return;
		}
		bad = count_mismatches(buf + i, (uint32_t)c->id, c->done_seq, (uint64_t)c->recv_off, seg, &first);
		note_mismatches(t, c, c->done_seq, bad, first);
		i += seg;
		c->recv_off += (long long)seg;
		if (c->recv_off == o.bytes) {
			uint64_t started = c->start_ns[c->done_seq & (c->ring - 1)];

			c->recv_off = 0;
			c->done_seq++;
			if (started >= t_measure_ns && now < t_end_ns) {
				t->requests++;
				t->bytes += (uint64_t)o.bytes;
				record_latency(t, now > started ? now - started : 0);
			}
		}
	}
}

void end_of_stream(struct lthread *t, struct lconn *c)
{
	if (c->done_seq < c->next_seq || c->recv_off || c->sent_off)
		t->short_closes++;
	c->dead = 1;
}

int outstanding(const struct lthread *t)
{
	int n = 0;

	for (int i = 0; i < t->nconn; i++)
		n += !t->conns[i].dead && t->conns[i].done_seq < t->conns[i].next_seq;
	return n;
}

void check_timeouts(struct lthread *t, uint64_t now)
{
	for (int i = 0; i < t->nconn; i++) {
		struct lconn *c = &t->conns[i];

		if (c->dead)
			continue;
		if (c->done_seq < c->next_seq && now - c->last_progress_ns > (uint64_t)(o.timeout * 1e9)) {
			t->timeouts++;
			c->dead = 1;
		}
		if (c->done_seq == c->next_seq)
			c->last_progress_ns = now;
	}
}

int wait_ms(const struct lthread *t, uint64_t now)
{
	uint64_t soonest = UINT64_MAX;

	if (o.rate <= 0)
		return 100;
	for (int i = 0; i < t->nconn; i++)
		if (!t->conns[i].dead && t->conns[i].next_due_ns < soonest)
			soonest = t->conns[i].next_due_ns;
	if (soonest <= now)
		return 0;
	return soonest - now > 100000000u ? 100 : (int)((soonest - now) / 1000000);
}

static void do_recv(struct lthread *t, struct lconn *c, uint64_t now)
{
	uint8_t buf[65536];

	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf), 0);

		if (n > 0) {
			consume_echo(t, c, buf, (size_t)n, now);
			continue;
		}
		if (n == 0) {
			end_of_stream(t, c);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK) {
			c->dead = 1;
			t->short_closes++;
		}
		return;
	}
}

static void start_lock_call(int err, const char *what)
{
	if (err) {
		errno = err;
		fail_setup(what);
	}
}

void ready_then_wait_for_clock(void)
{
	start_lock_call(pthread_mutex_lock(&start_lock), "pthread_mutex_lock");
	if (++ready_threads == o.threads)
		start_lock_call(pthread_cond_signal(&all_ready), "pthread_cond_signal");
	while (!clock_set)
		start_lock_call(pthread_cond_wait(&clock_started, &start_lock), "pthread_cond_wait");
	start_lock_call(pthread_mutex_unlock(&start_lock), "pthread_mutex_unlock");
}

/* Once every thread is ready: start the clock and release them. */
static void start_clock_when_all_ready(void)
{
	start_lock_call(pthread_mutex_lock(&start_lock), "pthread_mutex_lock");
	while (ready_threads < o.threads)
		start_lock_call(pthread_cond_wait(&all_ready, &start_lock), "pthread_cond_wait");
	t_start_ns = now_ns();
	t_measure_ns = t_start_ns + (uint64_t)(o.warmup * 1e9);
	t_end_ns = t_measure_ns + (uint64_t)(o.duration * 1e9);
	clock_set = 1;
	start_lock_call(pthread_cond_broadcast(&clock_started), "pthread_cond_broadcast");
	start_lock_call(pthread_mutex_unlock(&start_lock), "pthread_mutex_unlock");
}

static void *run_thread(void *arg)
{
	struct lthread *t = arg;
	struct epoll_event *events = calloc((size_t)t->nconn + 1, sizeof(*events));

	if (!events)
		fail_setup("calloc");
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	if (t->ep < 0)
		fail_setup("epoll_create1");
	for (int i = 0; i < t->nconn; i++) {
		struct lconn *c = &t->conns[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

		if (open_connection(t, c) != 0)
			continue;
		if (set_nonblock(c->fd) != 0 || epoll_ctl(t->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0)
			fail_setup("setting up a connection");
	}
	ready_then_wait_for_clock();
	for (int i = 0; i < t->nconn; i++) {
		struct lconn *c = &t->conns[i];

		start_connection_clock(t, c, i);
		if (!c->dead)
			do_send(t, c, now_ns());
	}
	for (;;) {
		uint64_t now = now_ns();
		int n;

		/* After the end, let in-flight echoes finish (bounded by --timeout). */
		if (now >= t_end_ns && !outstanding(t))
			break;
		n = epoll_wait(t->ep, events, t->nconn + 1, wait_ms(t, now));
		if (n < 0 && errno != EINTR)
			fail_setup("epoll_wait");
		now = now_ns();
		for (int i = 0; i < n; i++) {
			struct lconn *c = events[i].data.ptr;

			if (c->dead)
				continue;
			if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))
				do_recv(t, c, now);
			if (!c->dead && may_send(c, now))
				do_send(t, c, now);
		}
		for (int i = 0; i < t->nconn; i++) {
			struct lconn *c = &t->conns[i];

			if (c->dead)
				continue;
			if (o.rate > 0 && may_send(c, now) && !c->want_out)
				do_send(t, c, now);
		}
		check_timeouts(t, now);
	}
	close_connections(t);
	close(t->ep);
	free(events);
	return NULL;
}

/* --- thread-per-connection: rust_echo_bench's client model ----------------- */

/* The echo is read in pieces of at most this size, never past the end of the
 * current request, so a duplicated byte shows up as a mismatch in the next. */
#define BLOCKING_CHUNK 16384

/* Send and receive give up after --timeout: a server that stops answering
 * ends the connection as a timeout instead of hanging the run. */
static int set_io_timeouts(int fd)
{
	struct timeval tv = { .tv_sec = (time_t)o.timeout,
			      .tv_usec = (suseconds_t)((o.timeout - (double)(time_t)o.timeout) * 1e6) };

	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
		return -1;
	return setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void blocking_failure(struct lthread *t, struct lconn *c)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		t->timeouts++;
	else
		t->short_closes++;
	c->dead = 1;
}

/* Write the whole request next_seq. */
static void blocking_send(struct lthread *t, struct lconn *c, uint8_t *buf)
{
	for (long long off = 0; off < o.bytes && !c->dead;) {
		long long chunk = o.bytes - off < BLOCKING_CHUNK ? o.bytes - off : BLOCKING_CHUNK;

		fill_payload(buf, (uint32_t)c->id, c->next_seq, (uint64_t)off, (size_t)chunk);
		for (long long done = 0; done < chunk;) {
			ssize_t n = send(c->fd, buf + done, (size_t)(chunk - done), MSG_NOSIGNAL);

			if (n < 0) {
				if (errno == EINTR)
					continue;
				blocking_failure(t, c);
				return;
			}
			done += n;
		}
		off += chunk;
	}
}

/* Read the whole echo of request next_seq, checking every byte. */
static void blocking_recv(struct lthread *t, struct lconn *c, uint8_t *buf)
{
	for (long long off = 0; off < o.bytes && !c->dead;) {
		size_t want = (size_t)(o.bytes - off < BLOCKING_CHUNK ? o.bytes - off : BLOCKING_CHUNK);
		ssize_t n = recv(c->fd, buf, want, 0);

		if (n == 0) {
			t->short_closes++;
			c->dead = 1;
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			blocking_failure(t, c);
			return;
		}
		{
			long long first = 0;
			uint64_t bad = count_mismatches(buf, (uint32_t)c->id, c->next_seq, (uint64_t)off, (size_t)n, &first);

			note_mismatches(t, c, c->next_seq, bad, first);
		}
		off += n;
	}
}

/* After the last request: half-close, and anything the server still sends
 * before its end of stream is a byte it made up. */
static void blocking_drain(struct lthread *t, struct lconn *c, uint8_t *buf)
{
	if (shutdown(c->fd, SHUT_WR) != 0)
		return;
	for (;;) {
		ssize_t n = recv(c->fd, buf, BLOCKING_CHUNK, 0);

		if (n > 0) {
			note_mismatches(t, c, c->next_seq, (uint64_t)n, o.bytes);
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		return;   /* end of stream, or no answer within --timeout */
	}
}

static void *run_blocking_connection(void *arg)
{
	struct lthread *t = arg;
	struct lconn *c = &t->conns[0];
	uint8_t *buf = malloc(BLOCKING_CHUNK);

	if (!buf)
		fail_setup("malloc");
	c->fd = connect_one();
	if (c->fd < 0) {
		t->connect_errors++;
		c->dead = 1;
	} else if (set_io_timeouts(c->fd) != 0) {
		fail_setup("setsockopt SO_RCVTIMEO/SO_SNDTIMEO");
	}
	ready_then_wait_for_clock();
	while (!c->dead) {
		uint64_t started = now_ns(), finished;

		if (started >= t_end_ns)
			break;
		blocking_send(t, c, buf);
		blocking_recv(t, c, buf);
		if (c->dead)
			break;
		finished = now_ns();
		if (started >= t_measure_ns && finished < t_end_ns) {
			t->requests++;
			t->bytes += (uint64_t)o.bytes;
			record_latency(t, finished - started);
		}
		c->next_seq++;
	}
	if (!c->dead)
		blocking_drain(t, c, buf);
	if (c->fd >= 0)
		close(c->fd);
	free(buf);
	return NULL;
}

static double percentile(const uint64_t *hist, uint64_t total, double q)
{
	uint64_t rank = (uint64_t)ceil(q * (double)total), seen = 0;

	if (total == 0)
		return NAN;
	if (rank == 0)
		rank = 1;
	for (unsigned b = 0; b < NBUCKETS; b++) {
		seen += hist[b];
		if (seen >= rank) {
			uint64_t lo, hi;

			bucket_range(b, &lo, &hi);
			return (double)(lo + hi) / 2.0 / 1000.0;   /* bucket midpoint, µs */
		}
	}
	return NAN;
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

int main(int argc, char **argv)
{
	enum { O_HOST = 256, O_PORT, O_CONN, O_BYTES, O_DUR, O_WARM, O_THREADS, O_PIPE, O_RATE, O_TIMEOUT, O_HIST,
	       O_MODEL, O_CHECK };
	static const struct option longopts[] = {
		{ "host", required_argument, NULL, O_HOST }, { "port", required_argument, NULL, O_PORT },
		{ "connections", required_argument, NULL, O_CONN }, { "bytes", required_argument, NULL, O_BYTES },
		{ "duration", required_argument, NULL, O_DUR }, { "warmup", required_argument, NULL, O_WARM },
		{ "threads", required_argument, NULL, O_THREADS }, { "pipeline", required_argument, NULL, O_PIPE },
		{ "rate", required_argument, NULL, O_RATE }, { "timeout", required_argument, NULL, O_TIMEOUT },
		{ "histogram", required_argument, NULL, O_HIST }, { "model", required_argument, NULL, O_MODEL },
		{ "check", no_argument, NULL, O_CHECK }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct lthread *threads;
	uint64_t hist[NBUCKETS] = { 0 }, requests = 0, bytes = 0, mism = 0, shorts = 0, tmo = 0, cerr = 0;
	_Atomic uint64_t *shared_hist = NULL;
	struct rusage ru;
	pthread_attr_t attr;
	double secs, maxv = 0;
	char p50[32], p99[32], p999[32];
	const char *auto_why = NULL;
	int opt, failed, threads_given = 0, check = 0;

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
			threads_given = 1;
			break;
		case O_MODEL:
			o.model = model_named(optarg);
			break;
		case O_PIPE: o.pipeline = (int)parse_int_flag(PROG, "--pipeline", optarg, 1, 1 << 16); break;
		case O_RATE: o.rate = parse_seconds_flag(PROG, "--rate", optarg); break;	/* requests/s */
		case O_TIMEOUT: o.timeout = parse_seconds_flag(PROG, "--timeout", optarg); break;
		case O_HIST: o.histogram = optarg; break;
		case O_CHECK: check = 1; break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, PROG ": bad option; see --help\n"); return 2;
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
	if (o.model == MODEL_AUTO) {
		auto_why = uring_loop_unavailable();   /* sets up a trial ring: once */
		o.model = auto_why ? MODEL_EVENT_LOOP : MODEL_URING_LOOP;
	} else if (o.model == MODEL_URING_LOOP) {
		const char *why = uring_loop_unavailable();

		if (why) {
			fprintf(stderr, PROG ": --model event-loop-uring: %s\n", why);
			return 2;
		}
	}
	if (check) {
		/* The reason goes with the answer, for the sweep's provenance. */
		printf("{\"model\": \"%s\", \"uring_unavailable\": \"", MODEL_NAMES[o.model]);
		for (const char *c = auto_why ? auto_why : ""; *c; c++)
			printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
		printf("\"}\n");
		return 0;
	}
	require_flag(PROG, o.port >= 0, "--port");
	if (o.duration <= 0 || o.timeout <= 0) {
		fprintf(stderr, PROG ": --duration and --timeout must be positive\n");
		return 2;
	}
	if (o.model == MODEL_THREAD_PER_CONNECTION) {
		if (o.pipeline != 1 || o.rate > 0 || threads_given) {
			fprintf(stderr, PROG ": --model thread-per-connection is closed-loop ping-pong with one thread "
				"per connection; drop --pipeline, --rate and --threads\n");
			return 2;
		}
		o.threads = o.connections;
	}
	if (o.threads > o.connections)
		o.threads = o.connections;
	memset(&server, 0, sizeof(server));
	server.sin_family = AF_INET;
	server.sin_port = htons((uint16_t)o.port);
	if (inet_pton(AF_INET, o.host, &server.sin_addr) != 1) {
		fprintf(stderr, PROG ": --host %s: not an IPv4 address\n", o.host);
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (raise_nofile(PROG) < (size_t)o.connections + 64) {
		fprintf(stderr, PROG ": RLIMIT_NOFILE's hard limit is below %d connections; raise it (ulimit -Hn)\n",
			o.connections);
		return 2;
	}
	threads = calloc((size_t)o.threads, sizeof(*threads));
	if (!threads)
		fail_setup("calloc");
	if (o.model == MODEL_THREAD_PER_CONNECTION) {
		shared_hist = calloc(NBUCKETS, sizeof(*shared_hist));
		if (!shared_hist)
			fail_setup("calloc");
	}
	errno = pthread_attr_init(&attr);
	if (errno)
		fail_setup("pthread_attr_init");
	/* Thousands of blocking threads each need little stack. */
	if (o.model == MODEL_THREAD_PER_CONNECTION && (errno = pthread_attr_setstacksize(&attr, 256 * 1024)) != 0)
		fail_setup("pthread_attr_setstacksize");
	for (int i = 0, next = 0; i < o.threads; i++) {
		struct lthread *t = &threads[i];

		t->idx = i;
		t->hist = shared_hist ? shared_hist : calloc(NBUCKETS, sizeof(*t->hist));
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
		errno = pthread_create(&t->thread, &attr, o.model == MODEL_THREAD_PER_CONNECTION ? run_blocking_connection
				       : o.model == MODEL_URING_LOOP ? run_uring_thread : run_thread, t);
		if (errno) {
			fprintf(stderr, PROG ": starting thread %d of %d: %s (ulimit -u, or fewer --connections "
				"with one thread per connection)\n", i + 1, o.threads, strerror(errno));
			exit(2);
		}
	}
	start_clock_when_all_ready();
	for (int i = 0; i < o.threads; i++)
		pthread_join(threads[i].thread, NULL);

	for (int i = 0; i < o.threads; i++) {
		struct lthread *t = &threads[i];

		requests += t->requests;
		bytes += t->bytes;
		mism += t->mismatches;
		shorts += t->short_closes;
		tmo += t->timeouts;
		cerr += t->connect_errors;
		if (!shared_hist || i == 0)
			for (unsigned b = 0; b < NBUCKETS; b++)
				hist[b] += atomic_load_explicit(&t->hist[b], memory_order_relaxed);
	}
	for (unsigned b = 0; b < NBUCKETS; b++)
		if (hist[b]) {
			uint64_t lo, hi;

			bucket_range(b, &lo, &hi);
			maxv = (double)hi / 1000.0;
		}
	if (o.histogram) {
		struct raw_out f;

		if (raw_open(&f, o.histogram)) {
			fprintf(stderr, PROG ": --histogram %s: %s\n", o.histogram, strerror(f.err));
			return 2;
		}
		raw_printf(&f, "low_ns,high_ns,count\n");
		for (unsigned b = 0; b < NBUCKETS; b++)
			if (hist[b]) {
				uint64_t lo, hi;

				bucket_range(b, &lo, &hi);
				raw_printf(&f, "%llu,%llu,%llu\n", (unsigned long long)lo, (unsigned long long)hi,
					   (unsigned long long)hist[b]);
			}
		if (raw_close(&f, PROG))
			return 2;
	}
	if (getrusage(RUSAGE_SELF, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
	secs = o.duration;
	printf("{\"requests\": %llu, \"bytes\": %llu, \"duration_s\": %.3f, \"rps\": %.1f, "
	       "\"bytes_per_s\": %.1f, \"p50_us\": %s, \"p99_us\": %s, \"p999_us\": %s, "
	       "\"max_us\": %.3f, \"mismatches\": %llu, \"short_closes\": %llu, \"timeouts\": %llu, "
	       "\"connect_errors\": %llu, \"client_user_cpu_ns\": %llu, \"client_sys_cpu_ns\": %llu, "
	       "\"connections\": %d, \"request_bytes\": %lld, \"pipeline\": %d, \"rate\": %.1f, "
	       "\"threads\": %d, \"warmup_s\": %.3f, \"model\": \"%s\"}\n",
	       (unsigned long long)requests, (unsigned long long)bytes, secs, (double)requests / secs,
	       (double)bytes / secs, json_number(p50, sizeof(p50), percentile(hist, requests, 0.5)),
	       json_number(p99, sizeof(p99), percentile(hist, requests, 0.99)),
	       json_number(p999, sizeof(p999), percentile(hist, requests, 0.999)), maxv, (unsigned long long)mism,
	       (unsigned long long)shorts, (unsigned long long)tmo, (unsigned long long)cerr,
	       (unsigned long long)tv_ns(ru.ru_utime), (unsigned long long)tv_ns(ru.ru_stime),
	       o.connections, o.bytes, o.pipeline, o.rate, o.threads, o.warmup,
	       MODEL_NAMES[o.model]);
	fflush(stdout);
	failed = mism || shorts || tmo || cerr;
	if (failed) {
		fprintf(stderr, PROG ": FAILED: %llu mismatched bytes, %llu early closes, %llu timeouts, %llu failed connects",
			(unsigned long long)mism, (unsigned long long)shorts, (unsigned long long)tmo,
			(unsigned long long)cerr);
		for (int i = 0; i < o.threads; i++)
			if (threads[i].mismatches) {
				fprintf(stderr, " (first mismatch: connection %llu, request %llu, byte %lld)",
					(unsigned long long)threads[i].first_mismatch_conn,
					(unsigned long long)threads[i].first_mismatch_seq,
					threads[i].first_mismatch_off);
				break;
			}
		fprintf(stderr, "\n");
	}
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
