/*
 * loadgen's thread-per-connection model (--model thread-per-connection):
 * rust_echo_bench's client, the sources' own. One thread per connection on
 * a blocking socket writes the whole request, then reads the whole echo,
 * closed loop; the server gets one request per wake-up of each thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "../common/timing.h"
#include "loadgen.h"

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
			note_sent(c);
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
		note_answered(c, now_ns());
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

void *run_blocking_connection(void *arg)
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
	} else if (o.ramp_up) {
		/* Request 0, before the clock: this thread's share of the ramp-up. */
		blocking_send(t, c, buf);
		blocking_recv(t, c, buf);
		c->next_seq++;
		ramp_up_done(t, c);
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
