/*
 * loadgen's event loop on epoll (--model event-loop, the default): each
 * thread drives its connections non-blocking, sending while a request may
 * go and reading every echo as it arrives.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/timing.h"
#include "loadgen.h"

static int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);

	return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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

void *run_epoll_thread(void *arg)
{
	struct lthread *t = arg;
	struct epoll_event *events = calloc((size_t)t->nconn + 1, sizeof(*events));

	if (!events)
		fail_setup("calloc");
	t->ep = epoll_create1(EPOLL_CLOEXEC);
	if (t->ep < 0)
		fail_setup("epoll_create1");
	for (int i = 0; i < t->nconn; i++)
		open_connection(t, &t->conns[i]);
	if (o.ramp_up)
		ramp_up(t);
	for (int i = 0; i < t->nconn; i++) {
		struct lconn *c = &t->conns[i];
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };

		if (c->dead)
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
