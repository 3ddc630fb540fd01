/* echo-uring: one connection's sends. At most one SEND is in flight per
 * connection, so bytes are never reordered; a short send is resubmitted for
 * the rest (with --gather-send that SEND is a SENDMSG that carries every
 * queued chunk). Chunks queue here from the receive side (uring_conn.c).
 *
 * --send-bundle: each connection has a send buffer ring of its own, into
 * which its queued chunks go in order; one SEND with IORING_RECVSEND_BUNDLE
 * sends from it until it is empty, posting a completion (with F_MORE while
 * it goes on) for each pass. The kernel resumes a short send itself
 * (bundles send with MSG_WAITALL), so a pass ends where the ring's
 * entries did; the ring is incremental (IOU_PBUF_RING_INC) all the same,
 * so that a pass ending inside a chunk would leave its rest at the head,
 * and the bytes sent fill the queued chunks in order, as with plain
 * sends.
 *
 * --poll-first: every SEND goes with MSG_DONTWAIT; one that finds the
 * socket full waits on a one-shot POLLOUT and is sent again. */
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

/* --send-bundle: the connection's own send buffer ring. Buffer group ids
 * are 16 bits, and 0 is the receive ring's: a connection whose descriptor
 * is 65534 or more sends without a bundle. */
void send_ring_open(struct uring_ctx *r, int fd)
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
	int flags = MSG_NOSIGNAL | (r->o->poll_first ? MSG_DONTWAIT : 0);

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
	if (r->o->send_zc && r->o->zc_fixed && ch->bid >= 0) {
		/* The provided-buffer area is registered buffer 0 (--zc-fixed). */
		io_uring_prep_send_zc_fixed(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL,
					    IORING_SEND_ZC_REPORT_USAGE, 0);
		r->c.zc_fixed++;
	} else if (r->o->send_zc)
		io_uring_prep_send_zc(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL,
				      IORING_SEND_ZC_REPORT_USAGE);
	else if (r->o->gather_send && ch->next)
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
	if (r->o->poll_first) {
		/* The poll stays armed; data it reported while the buffer was busy
		 * is read now. */
		if (c->readable && !c->recv_inflight)
			recv_now(r, fd);
		return;
	}
	if (!c->recv_armed)
		arm_recv(r, fd);
}

void queue_chunk(struct uring_ctx *r, int fd, char *data, unsigned len, int bid)
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
void end_failed_send(struct uring_ctx *r, int fd)
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
	if (cqe->res == -EAGAIN && r->o->poll_first) {
		/* MSG_DONTWAIT found the socket full: send again once it has room. */
		struct io_uring_sqe *sqe = sqe_get(r);

		r->c.would_block++;
		io_uring_prep_poll_add(sqe, fd, POLLOUT);
		data_flags(r, sqe);
		io_uring_sqe_set_data64(sqe, ud(OP_POLLOUT, c->gen, fd));
		c->send_inflight = 1;
		return;
	}
	if (cqe->res == -EINVAL && r->o->send_zc) {
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
