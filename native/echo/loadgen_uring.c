/*
 * loadgen's io_uring event loop (--model event-loop-uring).
 *
 * The epoll loop's protocol (loadgen.c) on one ring per thread, set up with
 * SINGLE_ISSUER and DEFER_TASKRUN so that completions are posted only when
 * this thread waits for them, in one batch, with no interrupting task work.
 * Each connection has one multishot receive into a ring of provided buffers
 * (no re-arm per echo) and at most one send in flight, from its own buffer:
 * a request's bytes are generated once into it and re-sent from where the
 * kernel stopped after a short send. Every echoed byte is checked as in the
 * epoll loop.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <liburing.h>

#include "../common/timing.h"
#include "config.h"
#include "loadgen.h"

#if defined(HAVE_BUF_RING) && defined(HAVE_RECV_MULTISHOT) && defined(HAVE_DEFER_TASKRUN)

enum { OP_SEND = 1, OP_RECV = 2 };
#define BUF_GROUP 0
/* Provided buffers: at most this much memory per thread, however many
 * connections; fewer buffers only mean more re-arms after -ENOBUFS. */
#define RECV_MEMORY (64u << 20)
#define SEND_CHUNK 16384

struct uloop {
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	uint8_t *bufs, *send_bufs;
	unsigned nbufs, buf_size;
	size_t send_cap;
	int *rearm;        /* connections whose multishot receive ended */
	int nrearm;
};

static unsigned pow2_at_least(unsigned long long n, unsigned lo, unsigned hi)
{
	unsigned p = lo;

	while (p < n && p < hi)
		p *= 2;
	return p;
}

static uint64_t user_data(int op, int conn)
{
	return (uint64_t)op << 32 | (uint32_t)conn;
}

static int setup_ring(struct io_uring *ring, unsigned entries)
{
	struct io_uring_params p;

	memset(&p, 0, sizeof(p));
	p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_CQSIZE;
	p.cq_entries = entries * 4;
	return io_uring_queue_init_params(entries, ring, &p);
}

/* A buffer ring of nbufs entries registered as group BUF_GROUP; 0 or -errno. */
static int setup_buf_ring(struct io_uring *ring, struct io_uring_buf_ring **br, unsigned nbufs)
{
	struct io_uring_buf_reg reg;
	int ret;

	if (posix_memalign((void **)br, 4096, nbufs * sizeof(struct io_uring_buf)) != 0)
		return -ENOMEM;
	io_uring_buf_ring_init(*br);
	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (unsigned long)*br;
	reg.ring_entries = nbufs;
	reg.bgid = BUF_GROUP;
	ret = io_uring_register_buf_ring(ring, &reg, 0);
	if (ret < 0) {
		free(*br);
		*br = NULL;
	}
	return ret;
}

const char *uring_loop_unavailable(void)
{
	static char why[192];
	struct io_uring ring;
	struct io_uring_buf_ring *br;
	int ret = setup_ring(&ring, 8);

	if (ret < 0) {
		snprintf(why, sizeof(why), "the kernel refused a SINGLE_ISSUER|DEFER_TASKRUN ring: %s (%s)",
			 strerror(-ret), ret == -EPERM ? "see sysctl kernel.io_uring_disabled" : "needs Linux 6.1");
		return why;
	}
	ret = setup_buf_ring(&ring, &br, 8);
	io_uring_queue_exit(&ring);
	free(br);
	if (ret < 0) {
		snprintf(why, sizeof(why), "the kernel refused a provided-buffer ring: %s (needs Linux 5.19)",
			 strerror(-ret));
		return why;
	}
	return NULL;
}

static struct io_uring_sqe *get_sqe(struct uloop *u)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&u->ring);

	if (!sqe) {
		/* The SQ is full: hand it to the kernel and take a fresh slot. */
		int ret = io_uring_submit(&u->ring);

		if (ret < 0) {
			errno = -ret;
			fail_setup("io_uring_submit");
		}
		sqe = io_uring_get_sqe(&u->ring);
		if (!sqe)
			fail_setup("io_uring_get_sqe");
	}
	return sqe;
}

static void arm_recv(struct uloop *u, struct lconn *c, int i)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	io_uring_prep_recv_multishot(sqe, c->fd, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = BUF_GROUP;
	io_uring_sqe_set_data64(sqe, user_data(OP_RECV, i));
	c->recv_armed = 1;
}

static void submit_send(struct uloop *u, struct lconn *c, int i)
{
	struct io_uring_sqe *sqe = get_sqe(u);

	io_uring_prep_send(sqe, c->fd, u->send_bufs + (size_t)i * u->send_cap + c->send_done,
			   c->send_len - c->send_done, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, user_data(OP_SEND, i));
	c->send_inflight = 1;
}

/* Generate as many request bytes as may go now (several requests when
 * pipelined, up to the buffer) and send them in one SQE. */
static void try_send(struct uloop *u, struct lconn *c, int i, uint64_t now)
{
	uint8_t *buf = u->send_bufs + (size_t)i * u->send_cap;
	size_t len = 0;

	if (c->dead || c->send_inflight)
		return;
	while (len < u->send_cap && may_send(c, now)) {
		long long want = o.bytes - c->sent_off;
		size_t take = (size_t)want < u->send_cap - len ? (size_t)want : u->send_cap - len;

		if (c->sent_off == 0)
			begin_request(c, now);
		fill_payload(buf + len, (uint32_t)c->id, c->next_seq, (uint64_t)c->sent_off, take);
		len += take;
		advance_sent(c, (long long)take);
	}
	if (len) {
		c->send_len = len;
		c->send_done = 0;
		submit_send(u, c, i);
	}
}

static void return_buffer(struct uloop *u, unsigned bid)
{
	io_uring_buf_ring_add(u->br, u->bufs + (size_t)bid * u->buf_size, u->buf_size, (unsigned short)bid,
			      io_uring_buf_ring_mask(u->nbufs), 0);
	io_uring_buf_ring_advance(u->br, 1);
}

static void on_recv(struct lthread *t, struct uloop *u, int i, const struct io_uring_cqe *cqe, uint64_t now)
{
	struct lconn *c = &t->conns[i];

	if (!(cqe->flags & IORING_CQE_F_MORE))
		c->recv_armed = 0;
	if (cqe->res > 0) {
		unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;

		if (!c->dead)
			consume_echo(t, c, u->bufs + (size_t)bid * u->buf_size, (size_t)cqe->res, now);
		return_buffer(u, bid);
		if (!c->dead)
			try_send(u, c, i, now);
	} else if (cqe->res == 0) {
		if (!c->dead)
			end_of_stream(t, c);
	} else if (cqe->res != -ENOBUFS && !c->dead) {
		c->dead = 1;
		t->short_closes++;
	}
	/* Ended without an error (buffers ran out, or the kernel stopped the
	 * multishot): re-armed once this batch has returned its buffers. */
	if (!c->recv_armed && !c->dead)
		u->rearm[u->nrearm++] = i;
}

static void on_send(struct lthread *t, struct uloop *u, int i, const struct io_uring_cqe *cqe, uint64_t now)
{
	struct lconn *c = &t->conns[i];

	c->send_inflight = 0;
	if (c->dead)
		return;
	if (cqe->res < 0) {
		c->dead = 1;
		t->short_closes++;
		return;
	}
	c->send_done += (size_t)cqe->res;
	if (c->send_done < c->send_len)
		submit_send(u, c, i);   /* a short send: the rest, from where it stopped */
	else
		try_send(u, c, i, now);
}

static void setup_loop(struct lthread *t, struct uloop *u)
{
	unsigned long long per_conn = (unsigned long long)o.bytes * (unsigned long long)o.pipeline;
	unsigned entries = pow2_at_least(2ull * (unsigned)t->nconn, 64, 4096);
	int ret;

	u->buf_size = (unsigned)(per_conn < 64 ? 64 : per_conn > SEND_CHUNK ? SEND_CHUNK : (per_conn + 63) / 64 * 64);
	u->nbufs = pow2_at_least(2ull * (unsigned)t->nconn, 64, 32768);
	while (u->nbufs > 64 && (unsigned long long)u->nbufs * u->buf_size > RECV_MEMORY)
		u->nbufs /= 2;
	u->send_cap = per_conn < SEND_CHUNK ? (size_t)per_conn : SEND_CHUNK;
	ret = setup_ring(&u->ring, entries);
	if (ret < 0) {
		errno = -ret;
		fail_setup("io_uring_queue_init_params (SINGLE_ISSUER|DEFER_TASKRUN)");
	}
#ifdef HAVE_REGISTER_RING_FD
	/* Each wait then skips the ring's file lookup; an old kernel without it
	 * only costs that lookup, so a refusal is not an error. */
	(void)io_uring_register_ring_fd(&u->ring);
#endif
	ret = setup_buf_ring(&u->ring, &u->br, u->nbufs);
	if (ret < 0) {
		errno = -ret;
		fail_setup("io_uring_register_buf_ring");
	}
	if (posix_memalign((void **)&u->bufs, 4096, (size_t)u->nbufs * u->buf_size) != 0 ||
	    !(u->send_bufs = malloc((size_t)t->nconn * u->send_cap)) ||
	    !(u->rearm = calloc((size_t)t->nconn, sizeof(*u->rearm))))
		fail_setup("allocating the io_uring loop's buffers");
	for (unsigned b = 0; b < u->nbufs; b++)
		io_uring_buf_ring_add(u->br, u->bufs + (size_t)b * u->buf_size, u->buf_size, (unsigned short)b,
				      io_uring_buf_ring_mask(u->nbufs), (int)b);
	io_uring_buf_ring_advance(u->br, (int)u->nbufs);
}

void *run_uring_thread(void *arg)
{
	struct lthread *t = arg;
	struct uloop u;

	memset(&u, 0, sizeof(u));
	/* The ring belongs to this thread (SINGLE_ISSUER), so it is made here. */
	setup_loop(t, &u);
	for (int i = 0; i < t->nconn; i++)
		open_connection(t, &t->conns[i]);
	/* Before any receive is armed: it would take request 0's echo. */
	if (o.ramp_up)
		ramp_up(t);
	for (int i = 0; i < t->nconn; i++)
		if (!t->conns[i].dead)
			arm_recv(&u, &t->conns[i], i);
	ready_then_wait_for_clock();
	for (int i = 0; i < t->nconn; i++) {
		start_connection_clock(t, &t->conns[i], i);
		try_send(&u, &t->conns[i], i, now_ns());
	}
	for (;;) {
		uint64_t now = now_ns();
		int ms = wait_ms(t, now);
		struct __kernel_timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long long)(ms % 1000) * 1000000 };
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		/* After the end, let in-flight echoes finish (bounded by --timeout). */
		if (now >= t_end_ns && !outstanding(t))
			break;
		ret = io_uring_submit_and_wait_timeout(&u.ring, &cqe, 1, &ts, NULL);
		if (ret < 0 && ret != -ETIME && ret != -EINTR) {
			errno = -ret;
			fail_setup("io_uring_submit_and_wait_timeout");
		}
		now = now_ns();
		io_uring_for_each_cqe(&u.ring, head, cqe) {
			int i = (int)(uint32_t)cqe->user_data;

			if (cqe->user_data >> 32 == OP_RECV)
				on_recv(t, &u, i, cqe, now);
			else
				on_send(t, &u, i, cqe, now);
			seen++;
		}
		io_uring_cq_advance(&u.ring, seen);
		for (int k = 0; k < u.nrearm; k++)
			if (!t->conns[u.rearm[k]].recv_armed && !t->conns[u.rearm[k]].dead)
				arm_recv(&u, &t->conns[u.rearm[k]], u.rearm[k]);
		u.nrearm = 0;
		if (o.rate > 0)
			for (int i = 0; i < t->nconn; i++)
				try_send(&u, &t->conns[i], i, now);
		check_timeouts(t, now);
	}
	/* Closing the ring cancels the receives still armed; then the sockets. */
	io_uring_queue_exit(&u.ring);
	close_connections(t);
	free(u.br);
	free(u.bufs);
	free(u.send_bufs);
	free(u.rearm);
	return NULL;
}

#else

const char *uring_loop_unavailable(void)
{
	return "this liburing lacks buffer rings, multishot receive or DEFER_TASKRUN (needs liburing 2.3)";
}

void *run_uring_thread(void *arg)
{
	return arg;
}

#endif
