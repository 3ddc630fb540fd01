/*
 * loadgen's core, shared by its client models (loadgen_epoll.c,
 * loadgen_uring.c, loadgen_blocking.c): the options, the start line, the
 * payload every byte of which is checked, a connection's request
 * bookkeeping and the latency histogram.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/timing.h"
#include "loadgen.h"
#include "server.h"

struct options o = {
	.host = "127.0.0.1", .port = -1, .connections = 50, .threads = 1, .pipeline = 1,
	.bytes = 128, .duration = 10, .warmup = 2, .rate = 0, .timeout = 10, .ramp_up = 1,
};
struct sockaddr_in server_addr;
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
uint64_t count_mismatches(const uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len,
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
void bucket_range(unsigned b, uint64_t *low, uint64_t *high)
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

void record_latency(struct lthread *t, uint64_t ns)
{
	atomic_fetch_add_explicit(&t->hist[bucket_of(ns)], 1, memory_order_relaxed);
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
	if (connect(fd, (struct sockaddr *)&server_addr, sizeof(server_addr)) != 0 || set_nodelay(fd) != 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

uint64_t due_interval_ns(void)
{
	/* Open loop: each connection sends every connections/rate seconds. */
	return o.rate > 0 ? (uint64_t)((double)o.connections / o.rate * 1e9) : 0;
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

/* Ramp-up I/O on c when poll says it may go: send more of request 0,
 * read what came back of it. -1 when c died, else 0. */
static int ramp_step(struct lthread *t, struct lconn *c, short revents, uint8_t *buf, size_t size)
{
	if ((revents & POLLOUT) && c->sent_off < o.bytes) {
		size_t len = (size_t)(o.bytes - c->sent_off) < size ? (size_t)(o.bytes - c->sent_off) : size;
		ssize_t n;

		fill_payload(buf, (uint32_t)c->id, 0, (uint64_t)c->sent_off, len);
		n = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			c->sent_off += n;
		} else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			t->short_closes++;
			return -1;
		}
	}
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		/* Never past request 0's end: a byte too many is the next request's mismatch. */
		size_t len = (size_t)(o.bytes - c->recv_off) < size ? (size_t)(o.bytes - c->recv_off) : size;
		ssize_t n = recv(c->fd, buf, len, MSG_DONTWAIT);

		if (n > 0) {
			long long first = 0;

			note_mismatches(t, c, 0, count_mismatches(buf, (uint32_t)c->id, 0, (uint64_t)c->recv_off,
								  (size_t)n, &first), first);
			c->recv_off += n;
		} else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			t->short_closes++;
			return -1;
		}
	}
	return 0;
}

void ramp_up(struct lthread *t)
{
	struct pollfd *fds = calloc((size_t)t->nconn + 1, sizeof(*fds));
	int *which = calloc((size_t)t->nconn + 1, sizeof(*which));
	uint8_t buf[16384];
	uint64_t deadline = now_ns() + (uint64_t)(o.timeout * 1e9);

	if (!fds || !which)
		fail_setup("calloc");
	for (;;) {
		int n = 0, ready;

		for (int i = 0; i < t->nconn; i++) {
			struct lconn *c = &t->conns[i];

			if (c->dead || c->recv_off == o.bytes)
				continue;
			fds[n].fd = c->fd;
			fds[n].events = (short)(POLLIN | (c->sent_off < o.bytes ? POLLOUT : 0));
			which[n++] = i;
		}
		if (n == 0)
			break;
		if (now_ns() >= deadline) {
			/* Not answered within --timeout: timeouts, before the clock. */
			for (int k = 0; k < n; k++) {
				t->conns[which[k]].dead = 1;
				t->unanswered_at_start++;
				t->timeouts++;
			}
			break;
		}
		ready = poll(fds, (nfds_t)n, 100);
		if (ready < 0 && errno != EINTR)
			fail_setup("poll");
		for (int k = 0; k < n && ready > 0; k++)
			if (fds[k].revents && ramp_step(t, &t->conns[which[k]], fds[k].revents, buf, sizeof(buf)) < 0) {
				t->conns[which[k]].dead = 1;
				t->unanswered_at_start++;
			}
	}
	for (int i = 0; i < t->nconn; i++) {
		struct lconn *c = &t->conns[i];

		c->sent_off = c->recv_off = 0;
		c->next_seq = c->done_seq = 1;
	}
	free(which);
	free(fds);
}

void ramp_up_done(struct lthread *t, struct lconn *c)
{
	if (c->dead)
		t->unanswered_at_start++;
	c->first_sent_ns = 0;   /* the run judges its own first request */
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

void note_sent(struct lconn *c)
{
	if (!c->first_sent_ns)
		c->first_sent_ns = now_ns();
}

/* Only an answer within the run counts: after it, connections that finished
 * close and free the server's descriptors, and one it left waiting may be
 * accepted then. */
void note_answered(struct lconn *c, uint64_t now)
{
	if (now < t_end_ns)
		c->answered = 1;
}

void advance_sent(struct lconn *c, long long n)
{
	note_sent(c);
	c->sent_off += n;
	if (c->sent_off == o.bytes) {
		c->sent_off = 0;
		c->next_seq++;
		if (o.rate > 0)
			c->next_due_ns += due_interval_ns();
	}
}

/* Count `bad` mismatched bytes of request `seq`, remembering where the
 * run's first one was (`first`: its offset in the request). */
void note_mismatches(struct lthread *t, struct lconn *c, uint64_t seq, uint64_t bad, long long first)
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
	note_answered(c, now);
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

/* The server closed the connection. Before the run's end that is an early
 * close even between requests: the client still had requests to send. */
void end_of_stream(struct lthread *t, struct lconn *c)
{
	if (c->done_seq < c->next_seq || c->recv_off || c->sent_off || now_ns() < t_end_ns)
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
void start_clock_when_all_ready(void)
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

double percentile(const uint64_t *hist, uint64_t total, double q)
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
