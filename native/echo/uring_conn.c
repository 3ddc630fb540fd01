/* echo-uring: one connection's life. Receives and sends alternate with at
 * most one SEND in flight, so bytes are never reordered; a short send is
 * resubmitted for the rest (with --gather-send that SEND is a SENDMSG that
 * carries every queued chunk). Received chunks queue per connection; a full
 * queue cancels the multishot receive (backpressure) until it drains.
 *
 * --poll-first is the OpenAnolis study's server: a multishot POLL_ADD tells
 * when a connection is readable, and only then is a RECV submitted, with
 * MSG_DONTWAIT, as is every SEND. The kernel then completes each RECV and
 * SEND inside the io_uring_enter that submits it (io_submit_sqes), with data
 * or EAGAIN: it never arms a poll of its own for them, never runs their
 * completion as task work, and never hands them to io-wq. A send that finds
 * the socket full waits on a one-shot POLLOUT and is sent again.
 *
 * --send-bundle: each connection has a send buffer ring of its own, into
 * which its queued chunks go in order; one SEND with IORING_RECVSEND_BUNDLE
 * sends from it until it is empty, posting a completion (with F_MORE while
 * it goes on) for each pass. The kernel resumes a short send itself
 * (bundles send with MSG_WAITALL), so a pass ends where the ring's
 * entries did; the ring is incremental (IOU_PBUF_RING_INC) all the same,
 * so that a pass ending inside a chunk would leave its rest at the head,
 * and the bytes sent fill the queued chunks in order, as with plain
 * sends. */
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

	if (opts.multishot_accept)
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
static void recv_now(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_recv(sqe, fd, c->buf, opts.buf_size, MSG_DONTWAIT);
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, fd));
	c->recv_inflight = 1;
	c->readable = 0;
}

void arm_recv(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe;

	if (opts.poll_first) {
		arm_poll(r, fd);
		return;
	}
	/* A receive and its link timeout must go in the same submission. */
	make_room(r, opts.link_timeout_ms > 0 ? 2 : 1);
	sqe = sqe_get(r);
	int provided = opts.buf_ring || opts.buf_select;

	if (opts.multishot_recv)
		io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	else
		io_uring_prep_recv(sqe, fd, provided ? NULL : c->buf, opts.buf_size, 0);
	if (opts.recv_bundle) {
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
	if (opts.link_timeout_ms > 0) {
		struct io_uring_sqe *t = sqe_get(r);   /* reserve() kept a slot */

		sqe->flags |= opts.hardlink ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK;
		io_uring_prep_link_timeout(t, &link_ts, 0);
		io_uring_sqe_set_data64(t, ud(OP_TIMEOUT, c->gen, fd));
	}
}

/* Release a chunk's data: a provided buffer goes back to the ring. */
static void chunk_free(struct uring_ctx *r, struct uconn *c, struct chunk *ch)
{
	if (ch->bid >= 0) {
		buf_release(r, ch->bid);
		c->held--;
	} else if (ch->bid == COPIED)
		free(ch->data);
	free(ch);
}

/* Drop every chunk still queued on a connection, giving provided buffers back. */
static void drop_queue(struct uring_ctx *r, struct uconn *c)
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

static void conn_close(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	unstarve(r, fd);
	drop_queue(r, c);
	if (opts.napi_us) {
		/* Read at close, after the connection's packets: the id is set
		 * as they arrive. */
		unsigned napi_id = 0;
		socklen_t len = sizeof(napi_id);

		if (getsockopt(fd, SOL_SOCKET, SO_INCOMING_NAPI_ID, &napi_id, &len) != 0)
			die("getsockopt SO_INCOMING_NAPI_ID (--napi)", errno);
		r->c.napi_checked++;
		r->c.napi_conns += napi_id != 0;
	}
	if (opts.fixed_files) {
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
static int receiving(const struct uconn *c)
{
	return c->recv_armed || c->recv_inflight;
}

/* Close once nothing of this connection is queued or left in the kernel. */
static void close_when_idle(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	if (!c->head && !c->send_inflight && !c->zc_wait && !receiving(c))
		conn_close(r, fd);
}

static void cancel_recv(struct uring_ctx *r, int fd);
static void end_failed_send(struct uring_ctx *r, int fd);

/* The connection ends: echo what is queued, then close. With --poll-first
 * the poll lives as long as the connection, so it is cancelled now; it holds
 * the socket open until its last completion. */
static void start_closing(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	c->closing = 1;
	if (opts.poll_first && c->recv_armed && !c->recv_cancelling)
		cancel_recv(r, fd);
	close_when_idle(r, fd);
}

/* --send-bundle: the connection's own send buffer ring. Buffer group ids
 * are 16 bits, and 0 is the receive ring's: a connection whose descriptor
 * is 65534 or more sends without a bundle. */
static void send_ring_open(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	int ret;

	c->send_br = NULL;
	c->send_ring_n = 0;
	c->ring_next = NULL;
	if (fd >= 65534)
		return;
	if (posix_memalign((void **)&c->send_br, 4096, SEND_RING_ENTRIES * sizeof(struct io_uring_buf)) != 0)
		die("allocating a connection's send buffer ring", ENOMEM);
	io_uring_buf_ring_init(c->send_br);
	c->send_bgid = (unsigned short)(fd + 1);
	ret = register_buf_ring(r, c->send_br, SEND_RING_ENTRIES, c->send_bgid, 1);
	if (ret < 0) {
		fprintf(stderr, PROG ": --send-bundle: the kernel refused connection %d's send buffer ring: %s%s\n", fd,
			strerror(-ret), ret == -ENOMEM ? " (raise the locked-memory limit, ulimit -l)" : "");
		exit(1);
	}
}

/* --send-bundle: queued chunks not yet in the send ring join it, as far
 * as it has room. */
static void send_ring_fill(struct uconn *c)
{
	int added = 0;

	for (; c->ring_next && c->send_ring_n < SEND_RING_ENTRIES; c->ring_next = c->ring_next->next) {
		struct chunk *ch = c->ring_next;

		io_uring_buf_ring_add(c->send_br, ch->data + ch->off, ch->len - ch->off, (unsigned short)added,
				      io_uring_buf_ring_mask(SEND_RING_ENTRIES), added);
		added++;
		c->send_ring_n++;
	}
	if (added)
		io_uring_buf_ring_advance(c->send_br, added);
}

void conn_open(struct uring_ctx *r, int fd)
{
	struct uconn *c;

	if ((size_t)fd >= nconns || set_nodelay(fd) != 0) {
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
	if (!(opts.buf_ring || opts.buf_select)) {
		c->buf = malloc(opts.buf_size);
		if (!c->buf) {
			close(fd);
			c->open = 0;
			return;
		}
	}
	if (opts.fixed_files) {
		int ret = io_uring_register_files_update(&r->ring, (unsigned)fd, &fd, 1);

		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering fd %d: %s\n", fd, strerror(-ret));
			free(c->buf);
			close(fd);
			c->open = 0;
			return;
		}
	}
	if (opts.send_bundle)
		send_ring_open(r, fd);
	r->c.accepted++;
	r->open_conns++;
	arm_recv(r, fd);
}

/* --gather-send: point the connection's message at every queued chunk (up
 * to IOV_MAX), the head from where its last send stopped. */
static struct msghdr *gather_queue(struct uconn *c)
{
	unsigned n = 0;

	for (struct chunk *ch = c->head; ch && n < IOV_MAX; ch = ch->next)
		n++;
	if (!c->gather || c->gather->cap < n) {
		unsigned cap = c->gather && c->gather->cap * 2 > n ? c->gather->cap * 2 : n;
		struct send_gather *g = realloc(c->gather, sizeof(*g) + cap * sizeof(g->iov[0]));

		if (!g)
			die("growing a connection's send vector", ENOMEM);
		g->cap = cap;
		c->gather = g;
	}
	c->send_len = 0;
	n = 0;
	for (struct chunk *ch = c->head; ch && n < IOV_MAX; ch = ch->next) {
		c->gather->iov[n++] = (struct iovec){ ch->data + ch->off, ch->len - ch->off };
		c->send_len += ch->len - ch->off;
	}
	c->send_pieces = n;
	c->gather->msg = (struct msghdr){ .msg_iov = c->gather->iov, .msg_iovlen = n };
	return &c->gather->msg;
}

static void send_head(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct chunk *ch = c->head;
	struct io_uring_sqe *sqe = sqe_get(r);
	int flags = MSG_NOSIGNAL | (opts.poll_first ? MSG_DONTWAIT : 0);

	c->send_pieces = 1;
	c->send_len = ch->len - ch->off;
	if (c->send_br) {
		/* Sends from the ring until it is empty; no length, no address. */
		send_ring_fill(c);
		io_uring_prep_send(sqe, fd, NULL, 0, MSG_NOSIGNAL);
		sqe->ioprio |= IORING_RECVSEND_BUNDLE;
		data_flags(r, sqe);
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = c->send_bgid;
		io_uring_sqe_set_data64(sqe, ud(OP_SEND, c->gen, fd));
		c->send_inflight = 1;
		return;
	}
	if (opts.send_zc && opts.zc_fixed && ch->bid >= 0) {
		/* The provided-buffer area is registered buffer 0 (--zc-fixed). */
		io_uring_prep_send_zc_fixed(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL,
					    IORING_SEND_ZC_REPORT_USAGE, 0);
		r->c.zc_fixed++;
	} else if (opts.send_zc)
		io_uring_prep_send_zc(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL,
				      IORING_SEND_ZC_REPORT_USAGE);
	else if (opts.gather_send && ch->next)
		io_uring_prep_sendmsg(sqe, fd, gather_queue(c), (unsigned)flags);
	else
		io_uring_prep_send(sqe, fd, ch->data + ch->off, ch->len - ch->off, flags);
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, c->gen, fd));
	c->send_inflight = 1;
}

/* Release the chunks at the head of the queue that were sent whole. */
static void release_sent(struct uring_ctx *r, struct uconn *c)
{
	struct chunk *ch;

	while ((ch = c->head) && ch->off == ch->len) {
		c->head = ch->next;
		if (!c->head)
			c->tail = NULL;
		c->queued--;
		chunk_free(r, c, ch);
	}
}

/* After a send finished (and its zero-copy notification, if any): release a
 * finished chunk, send the next, re-arm the receive, or close. */
static void after_send(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	release_sent(r, c);
	if (c->head) {
		send_head(r, fd);
		return;
	}
	if (c->closing) {
		close_when_idle(r, fd);
		return;
	}
	if (opts.poll_first) {
		/* The poll stays armed; data it reported while the buffer was busy
		 * is read now. */
		if (c->readable && !c->recv_inflight)
			recv_now(r, fd);
		return;
	}
	if (!c->recv_armed)
		arm_recv(r, fd);
}

static void queue_chunk(struct uring_ctx *r, int fd, char *data, unsigned len, int bid)
{
	struct uconn *c = &r->conns[fd];
	struct chunk *ch = malloc(sizeof(*ch));

	if (!ch)
		die("queueing a chunk", ENOMEM);
	*ch = (struct chunk){ data, len, 0, bid, NULL };
	if (c->tail)
		c->tail->next = ch;
	else
		c->head = ch;
	c->tail = ch;
	c->queued++;
	if (bid >= 0)
		c->held++;
	if (c->send_br) {
		/* Into the ring at once: a bundle still sending takes it too. */
		if (!c->ring_next)
			c->ring_next = ch;
		send_ring_fill(c);
	}
	if (!c->send_inflight && !c->zc_wait)
		send_head(r, fd);
}

static void cancel_recv(struct uring_ctx *r, int fd)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_cancel64(sqe, ud(opts.poll_first ? OP_POLL : OP_RECV, r->conns[fd].gen, fd), 0);
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
		if ((unsigned)cqe->res == opts.buf_size || c->hup)
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
	unsigned long long held = (unsigned long long)opts.buf_count * opts.hold_pct / 100u;

	if (opts.hold_pct == 0)
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
		unsigned room = opts.buf_size - (unsigned)(piece - buf_addr(r, bids[i]));
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
		nbufs = recv_buffers(r, cqe, bids, r->bundle_bids ? opts.buf_count : 1, &data);
	if (stale) {
		for (unsigned i = 0; i < nbufs; i++)
			buf_release(r, bids[i]);
		return;
	}
	if (opts.poll_first) {
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
		if (!more && opts.multishot_recv)
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
		if (r->bufs_held < opts.buf_count)
			arm_recv(r, fd);
		else if (r->nstarved < nconns)
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

void on_pollout(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];

	if (stale)
		return;
	c->send_inflight = 0;
	if (cqe->res < 0) {
		c->closing = 1;
		c->send_failed = 1;
		end_failed_send(r, fd);
		return;
	}
	send_head(r, fd);   /* room in the socket again */
}

/* A send failed (the peer is gone) and the kernel holds none of its
 * buffers any more: drop what the peer will never read, then close. */
static void end_failed_send(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	drop_queue(r, c);
	if (!receiving(c))
		conn_close(r, fd);
	else if (c->recv_armed && !c->recv_cancelling)
		cancel_recv(r, fd);
}

/* The bytes a send sent fill the queued chunks from the head, in order
 * (with --send-bundle, those in the ring: up to c->ring_next). Returns how
 * many chunks they touched; *whole: how many they finished. */
static unsigned fill_sent(struct uconn *c, unsigned bytes, unsigned *whole)
{
	unsigned pieces = 0;

	*whole = 0;
	for (struct chunk *ch = c->head; bytes > 0; ch = ch->next) {
		unsigned take;

		if (!ch || ch == c->ring_next)
			die("a send sent more than its connection had queued", EPROTO);
		take = ch->len - ch->off < bytes ? ch->len - ch->off : bytes;
		ch->off += take;
		bytes -= take;
		pieces++;
		*whole += ch->off == ch->len;
	}
	return pieces;
}

/* --send-bundle: one pass of a bundle send. F_MORE: the send goes on with
 * what the ring still holds; without it, it ended (the ring empty, or an
 * error). */
static void on_bundle_send(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd)
{
	struct uconn *c = &r->conns[fd];
	unsigned pieces, whole;

	c->send_inflight = (cqe->flags & IORING_CQE_F_MORE) != 0;
	if (cqe->res == -EINVAL) {
		fprintf(stderr, PROG ": unavailable: this kernel refused a send bundle (EINVAL; --send-bundle needs "
			"Linux 6.10+)\n");
		exit(2);
	}
	if (cqe->res < 0 && cqe->res != -ENOBUFS) {
		if (c->send_inflight)
			return;
		c->closing = 1;
		c->send_failed = 1;
		end_failed_send(r, fd);
		return;
	}
	/* A chunk sent whole is an entry the kernel used up. (ENOBUFS, a pass
	 * that found the ring empty, sent nothing: the next send takes what is
	 * queued.) */
	pieces = fill_sent(c, cqe->res > 0 ? (unsigned)cqe->res : 0, &whole);
	c->send_ring_n -= whole;
	if (pieces) {
		r->c.bytes += (uint64_t)cqe->res;
		r->c.send_buffers += pieces;
		r->c.send_bufs_hist[bufs_hist_bin(pieces)]++;
	}
	release_sent(r, c);
	send_ring_fill(c);
	if (!c->send_inflight)
		after_send(r, fd);
}

void on_send(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];
	unsigned whole;

	if (stale)
		return;
	if (c->send_br) {
		on_bundle_send(r, cqe, fd);
		return;
	}
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		/* Zero-copy: the kernel no longer needs the buffer; the usage
		 * report says whether it copied the bytes anyway (loopback does). */
		r->c.zc_notifs++;
		if ((unsigned)cqe->res & IORING_NOTIF_USAGE_ZC_COPIED)
			r->c.zc_copied++;
		c->zc_wait = 0;
		if (c->send_failed)
			end_failed_send(r, fd);
		else
			after_send(r, fd);
		return;
	}
	c->send_inflight = 0;
	if (cqe->res == -EAGAIN && opts.poll_first) {
		/* MSG_DONTWAIT found the socket full: send again once it has room. */
		struct io_uring_sqe *sqe = sqe_get(r);

		r->c.would_block++;
		io_uring_prep_poll_add(sqe, fd, POLLOUT);
		data_flags(r, sqe);
		io_uring_sqe_set_data64(sqe, ud(OP_POLLOUT, c->gen, fd));
		c->send_inflight = 1;
		return;
	}
	if (cqe->res == -EINVAL && opts.send_zc) {
		/* Every zero-copy send asks for a usage report: a kernel without
		 * them refuses the first send. */
		fprintf(stderr, PROG ": unavailable: this kernel refused a zero-copy send with "
			"IORING_SEND_ZC_REPORT_USAGE (EINVAL; Linux 6.2+)\n");
		exit(2);
	}
	if (cqe->res < 0) {
		c->closing = 1;
		c->send_failed = 1;
		/* A zero-copy send that failed may still hold the buffer: its
		 * notification follows (F_MORE). Nothing is freed before it. */
		if (cqe->flags & IORING_CQE_F_MORE) {
			c->zc_wait = 1;
			return;
		}
		end_failed_send(r, fd);
		return;
	}
	r->c.bytes += (uint64_t)cqe->res;
	r->c.send_buffers += c->send_pieces;
	r->c.send_bufs_hist[bufs_hist_bin(c->send_pieces)]++;
	if ((unsigned)cqe->res < c->send_len)
		r->c.short_writes++;
	fill_sent(c, (unsigned)cqe->res, &whole);
	if (cqe->flags & IORING_CQE_F_MORE) {
		c->zc_wait = 1;   /* after_send runs when the notification arrives */
		return;
	}
	after_send(r, fd);
}

void route_or_open(struct uring_ctx *r, int fd)
{
	int target = opts.granule > 0 ? (fd / opts.granule) % opts.rings : r->idx;

	if (target == r->idx) {
		conn_open(r, fd);
		return;
	}
	/* Hand the connection to its ring: a CQE appears there. */
	{
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_msg_ring(sqe, rings[target].ring.ring_fd, 0, ud(OP_HANDOFF, 0, fd), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_MSG, 0, fd));
	}
}
