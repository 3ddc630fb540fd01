/* echo-uring: one connection's life, but for its sends (uring_send.c):
 * accepting it, receiving, queueing what arrived for the echo, and closing.
 * A full queue cancels the multishot receive (backpressure) until it
 * drains.
 *
 * --poll-first is the OpenAnolis study's server: a multishot POLL_ADD tells
 * when a connection is readable, and only then is a RECV submitted, with
 * MSG_DONTWAIT, as is every SEND. The kernel then completes each RECV and
 * SEND inside the io_uring_enter that submits it (io_submit_sqes), with data
 * or EAGAIN: it never arms a poll of its own for them, never runs their
 * completion as task work, and never hands them to io-wq. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <liburing.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/uring_compat.h"
#include "echo_uring.h"

void arm_accept(struct uring_ctx *r)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	if (r->o->multishot_accept)
		io_uring_prep_multishot_accept(sqe, r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	else
		io_uring_prep_accept(sqe, r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, 0));
}

/* --poll-first: one multishot poll per connection, armed for its life. */
static void arm_poll(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_poll_multishot(sqe, fd, POLLIN | POLLRDHUP);
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_POLL, c->gen, fd));
	c->recv_armed = 1;
}

/* --poll-first: a RECV the kernel completes in the submission that carries it. */
void recv_now(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_recv(sqe, fd, c->buf, r->o->buf_size, MSG_DONTWAIT);
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, fd));
	c->recv_inflight = 1;
	c->readable = 0;
}

void arm_recv(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe;

	if (r->o->poll_first) {
		arm_poll(r, fd);
		return;
	}
	/* A receive and its link timeout must go in the same submission. */
	make_room(r, r->o->link_timeout_ms > 0 ? 2 : 1);
	sqe = sqe_get(r);
	int provided = r->o->buf_ring || r->o->buf_select;

	if (r->o->multishot_recv)
		io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	else
		io_uring_prep_recv(sqe, fd, provided ? NULL : c->buf, r->o->buf_size, 0);
	if (r->o->recv_bundle) {
		/* A bundle takes as many buffers as the data fills: no length. */
		sqe->ioprio |= IORING_RECVSEND_BUNDLE;
		sqe->len = 0;
	}
	if (provided) {
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = 0;
	}
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, fd));
	c->recv_armed = 1;
	if (r->o->link_timeout_ms > 0) {
		struct io_uring_sqe *t = sqe_get(r);   /* reserve() kept a slot */

		sqe->flags |= r->o->hardlink ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK;
		io_uring_prep_link_timeout(t, &r->s->link_ts, 0);
		io_uring_sqe_set_data64(t, ud(OP_TIMEOUT, c->gen, fd));
	}
}

/* Release a chunk's data: a provided buffer goes back to the ring. */
void chunk_free(struct uring_ctx *r, struct uconn *c, struct chunk *ch)
{
	if (ch->bid >= 0) {
		buf_release(r, ch->bid);
		c->held--;
	} else if (ch->bid == COPIED)
		free(ch->data);
	free(ch);
}

/* Drop every chunk still queued on a connection, giving provided buffers back. */
void drop_queue(struct uring_ctx *r, struct uconn *c)
{
	/* With --send-bundle no send is in flight here: nothing reads the
	 * ring's entries again before it is unregistered at close. */
	c->ring_next = NULL;
	while (c->head) {
		struct chunk *ch = c->head;

		c->head = ch->next;
		chunk_free(r, c, ch);
	}
	c->tail = NULL;
	c->queued = 0;
}

void conn_close(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	unstarve(r, fd);
	drop_queue(r, c);
	if (r->o->napi_us) {
		/* Read at close, after the connection's packets: the id is set
		 * as they arrive. */
		unsigned napi_id = 0;
		socklen_t len = sizeof(napi_id);

		if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &napi_id, &len) != 0)
			die("getsockopt SO_INCOMING_NAPI_ID (--napi)", errno);
		r->c.napi_checked++;
		r->c.napi_conns += napi_id != 0;
	}
	if (r->o->fixed_files) {
		int minus_one = -1;

		(void)io_uring_register_files_update(&r->ring, (unsigned)fd, &minus_one, 1);
	}
	if (c->send_br) {
		int ret = io_uring_unregister_buf_ring(&r->ring, c->send_bgid);

		if (ret < 0)
			die("unregistering a connection's send buffer ring (--send-bundle)", -ret);
		free(c->send_br);
		c->send_br = NULL;
	}
	free(c->buf);
	free(c->gather);
	close(fd);
	c->open = 0;
	c->buf = NULL;
	c->gather = NULL;
	c->gen++;   /* CQEs still in flight for this fd are now stale */
	r->c.closed++;
	r->open_conns--;
}

/* Whether the kernel still holds a receive of this connection: the armed
 * receive (with --poll-first, the poll) or a RECV in flight. */
int receiving(const struct uconn *c)
{
	return c->recv_armed || c->recv_inflight;
}

/* Close once nothing of this connection is queued or left in the kernel. */
void close_when_idle(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	if (!c->head && !c->send_inflight && !c->zc_wait && !receiving(c))
		conn_close(r, fd);
}


/* The connection ends: echo what is queued, then close. With --poll-first
 * the poll lives as long as the connection, so it is cancelled now; it holds
 * the socket open until its last completion. */
static void start_closing(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	c->closing = 1;
	if (r->o->poll_first && c->recv_armed && !c->recv_cancelling)
		cancel_recv(r, fd);
	close_when_idle(r, fd);
}

void conn_open(struct uring_ctx *r, int fd)
{
	struct uconn *c;

	if ((size_t)fd >= r->s->nconns || set_nodelay(fd) != 0) {
		close(fd);
		return;
	}
	c = &r->conns[fd];
	c->open = 1;
	c->closing = c->recv_armed = c->recv_cancelling = c->send_inflight = c->zc_wait = c->send_failed = 0;
	c->recv_inflight = c->readable = c->hup = 0;
	c->ring = r->idx;
	c->head = c->tail = NULL;
	c->queued = c->held = 0;
	if (!(r->o->buf_ring || r->o->buf_select)) {
		c->buf = malloc(r->o->buf_size);
		if (!c->buf) {
			close(fd);
			c->open = 0;
			return;
		}
	}
	if (r->o->fixed_files) {
		int ret = io_uring_register_files_update(&r->ring, (unsigned)fd, &fd, 1);

		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering fd %d: %s\n", fd, strerror(-ret));
			free(c->buf);
			close(fd);
			c->open = 0;
			return;
		}
	}
	if (r->o->send_bundle)
		send_ring_open(r, fd);
	r->c.accepted++;
	r->open_conns++;
	arm_recv(r, fd);
}

void cancel_recv(struct uring_ctx *r, int fd)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_cancel64(sqe, ud(r->o->poll_first ? OP_POLL : OP_RECV, r->conns[fd].gen, fd), 0);
	io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
	r->conns[fd].recv_cancelling = 1;
}

/* --poll-first: a RECV, completed in the submission that carried it. */
static void on_polled_recv(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd)
{
	struct uconn *c = &r->conns[fd];

	c->recv_inflight = 0;
	if (cqe->res == -EAGAIN) {
		/* The poll's wake-up found the data already read: wait for the next. */
		r->c.would_block++;
		if (c->closing)
			close_when_idle(r, fd);
		return;
	}
	if (cqe->res > 0 && !c->closing) {
		r->c.requests++;
		/* A full buffer may leave bytes in the socket, and the peer's end
		 * may wait behind this data: neither raises a new poll event, so
		 * read again once this echo has gone. */
		if ((unsigned)cqe->res == r->o->buf_size || c->hup)
			c->readable = 1;
		queue_chunk(r, fd, c->buf, (unsigned)cqe->res, OWN_BUFFER);
		return;
	}
	if (cqe->res > 0) {   /* after a failed send: the peer reads nothing more */
		close_when_idle(r, fd);
		return;
	}
	start_closing(r, fd);
}

/* The provided buffers one connection may keep queued: --hold-share (half
 * by default) of the ring's pool, shared among its open connections.
 * However many connections stop reading, together they hold at most that
 * much of the pool (a share only shrinks as connections arrive), so the
 * others, a new one among them, still find buffers to receive into. A
 * bundle takes many buffers in one completion: what it brings beyond the
 * share is copied out and its buffers returned. */
static unsigned fair_share(const struct uring_ctx *r)
{
	unsigned long long held = (unsigned long long)r->o->buf_count * r->o->hold_pct / 100u;

	if (r->o->hold_pct == 0)
		return UINT_MAX;   /* --hold-share 0: no cap */

	return (unsigned)(held / (r->open_conns ? r->open_conns : 1u));
}

/* Queue a receive's data for the echo, one chunk per provided buffer it
 * filled. A connection whose echo is backing up (a slow reader: half the
 * queue full before this receive), or that holds its share of the buffers
 * already, keeps the data in memory of its own and gives the shared
 * buffers back at once, so it cannot hold the buffers the other
 * connections receive into. */
static void queue_received(struct uring_ctx *r, int fd, const int *bids, unsigned nbufs, char *data, unsigned len)
{
	struct uconn *c = &r->conns[fd];
	int backing_up = c->queued >= MAX_QUEUED_CHUNKS / 2;
	unsigned share = fair_share(r);

	if (nbufs == 0) {
		queue_chunk(r, fd, c->buf, len, OWN_BUFFER);
		return;
	}
	for (unsigned i = 0; i < nbufs; i++) {
		/* Only the first piece may start inside its buffer (an incremental
		 * buffer partly used); each fills its buffer's rest, the last the
		 * bytes left. */
		char *piece = i == 0 ? data : buf_addr(r, bids[i]);
		unsigned room = r->o->buf_size - (unsigned)(piece - buf_addr(r, bids[i]));
		unsigned piece_len = len < room ? len : room;

		len -= piece_len;
		if (backing_up || c->held >= share) {
			char *copy = malloc(piece_len);

			if (!copy)
				die("copying a received chunk", ENOMEM);
			memcpy(copy, piece, piece_len);
			buf_release(r, bids[i]);
			queue_chunk(r, fd, copy, piece_len, COPIED);
		} else {
			queue_chunk(r, fd, piece, piece_len, bids[i]);
		}
	}
}

void on_recv(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];
	int more = cqe->flags & IORING_CQE_F_MORE;
	int one_bid;
	int *bids = r->bundle_bids ? r->bundle_bids : &one_bid;
	unsigned nbufs = 0;
	char *data = NULL;

	if (cqe->flags & IORING_CQE_F_BUFFER)
		nbufs = recv_buffers(r, cqe, bids, r->bundle_bids ? r->o->buf_count : 1, &data);
	if (stale) {
		for (unsigned i = 0; i < nbufs; i++)
			buf_release(r, bids[i]);
		return;
	}
	if (r->o->poll_first) {
		on_polled_recv(r, cqe, fd);
		return;
	}
	if (!more) {
		c->recv_armed = 0;
		c->recv_cancelling = 0;
	}
	if (cqe->res > 0) {
		unsigned queued_before = c->queued;

		r->c.requests++;
		/* A multishot receive that ended without an error (a bundle that
		 * drained the buffer ring ends so, without ENOBUFS): after_send
		 * re-arms it once the echo has gone. */
		if (!more && r->o->multishot_recv)
			r->c.rearms++;
		queue_received(r, fd, bids, nbufs, data, (unsigned)cqe->res);
		/* Backpressure: stop a multishot receive while this connection's
		 * queue is full (before this receive: a bundle's chunks count as
		 * one receive); after_send re-arms it. */
		if (more && queued_before + 1 >= MAX_QUEUED_CHUNKS && !c->recv_cancelling)
			cancel_recv(r, fd);
		return;
	}
	for (unsigned i = 0; i < nbufs; i++)
		buf_release(r, bids[i]);
	if (cqe->res == -ENOBUFS) {
		/* Every provided buffer is in use; re-armed when one returns
		 * (buf_return), or when this connection's queue drains. */
		r->c.nobufs++;
		if (c->head || c->recv_armed)
			return;
		/* Buffers may have come back between the kernel's failure and
		 * this completion; then no later return would wake this one. */
		if (r->bufs_held < r->o->buf_count)
			arm_recv(r, fd);
		else if (r->nstarved < r->s->nconns)
			r->starved[r->nstarved++] = fd;
		return;
	}
	if (cqe->res == -ECANCELED && !c->closing) {
		/* A link timeout fired on an idle connection, or we cancelled a
		 * multishot receive for backpressure (after_send re-arms that). */
		if (!c->head && !c->recv_armed)
			arm_recv(r, fd);
		return;
	}
	if (cqe->res == -EINVAL) {
		fprintf(stderr, PROG ": the kernel refused a receive in this configuration: %s\n",
			strerror(EINVAL));
		exit(2);
	}
	/* 0: the peer closed (or half-closed) its side; errors end it too.
	 * Echo what is queued, then close. */
	start_closing(r, fd);
}

void on_poll(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];

	if (stale)
		return;
	if (!(cqe->flags & IORING_CQE_F_MORE)) {
		/* The poll ended: cancelled as the connection closes, failed, or
		 * stopped by the kernel (a full CQ); re-armed unless closing. */
		c->recv_armed = 0;
		c->recv_cancelling = 0;
		if (c->closing) {
			close_when_idle(r, fd);
			return;
		}
		if (cqe->res < 0 && cqe->res != -ECANCELED) {
			start_closing(r, fd);
			return;
		}
		arm_poll(r, fd);
	}
	if (cqe->res <= 0 || c->closing)
		return;
	if (cqe->res & (POLLRDHUP | POLLHUP | POLLERR))
		c->hup = 1;
	if (c->recv_inflight || c->head || c->send_inflight || c->zc_wait)
		c->readable = 1;   /* the buffer is in use: read once the echo has gone */
	else
		recv_now(r, fd);
}

void route_or_open(struct uring_ctx *r, int fd)
{
	int target = r->o->granule > 0 ? (fd / r->o->granule) % r->o->rings : r->idx;

	if (target == r->idx) {
		conn_open(r, fd);
		return;
	}
	/* Hand the connection to its ring: a CQE appears there. */
	{
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_msg_ring(sqe, r->s->rings[target].ring.ring_fd, 0, ud(OP_HANDOFF, 0, fd), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_MSG, 0, fd));
	}
}
