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
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/ring_setup.h"
#include "../common/timing.h"
#include "config.h"
#include "server.h"

#define PROG "echo-uring"
#define MAX_QUEUED_CHUNKS 8   /* per connection, before backpressure */
#define STOP_CHECK_MS 100     /* how often ring 0 looks for SIGTERM/SIGINT */

enum op { OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_TIMEOUT, OP_PROVIDE, OP_HANDOFF, OP_CANCEL, OP_MSG, OP_STOP };

struct options {
	const char *bind;
	int port;
	struct ring_setup ring;   /* the ring flags; attach_wq_fd is set per ring */
	int attach_wq;
	int async, buf_select, buf_ring, fixed_files, link_timeout_ms, hardlink, drain;
	int multishot_accept, multishot_recv, send_zc;
	int rings, granule;
	unsigned buf_size, buf_count;
};

struct chunk {
	char *data;
	unsigned len, off;
	int bid;             /* provided-buffer id, OWN_BUFFER or COPIED */
	struct chunk *next;
};

#define OWN_BUFFER (-1)  /* the connection's own receive buffer */
#define COPIED     (-2)  /* a heap copy, freed with the chunk */

struct uconn {
	int open, closing, recv_armed, recv_cancelling, send_inflight, zc_wait, send_failed;
	uint32_t gen;
	int ring;            /* owning ring */
	char *buf;           /* own receive buffer (no provided buffers) */
	struct chunk *head, *tail;
	unsigned queued;
};

struct uring_ctx {
	int idx;
	struct uconn *conns; /* this ring's connections, fd-indexed, sized from RLIMIT_NOFILE */
	int *starved;        /* connections whose receive found no buffer */
	size_t nstarved;
	pthread_t thread;
	struct io_uring ring;
	int listen_fd;       /* -1 when ring 0 routes connections here */
	struct io_uring_buf_ring *br;
	char *bufs;
	unsigned bufs_held;  /* provided buffers this program holds (CQE seen, not returned) */
	struct echo_counters c;
};

static struct options o = {
	.bind = "127.0.0.1", .port = -1, .ring = RING_SETUP_DEFAULT(1024),
	.rings = 1, .buf_size = 4096, .buf_count = 4096,
};
static size_t nconns;             /* every connection table's size */
static struct uring_ctx *rings;
static int stop_fd = -1;          /* signalfd for SIGTERM/SIGINT, read by ring 0 */
static atomic_int stopping;       /* set by ring 0 once a stop signal arrived */
/* The kernel copies the timeout at submission; one value serves every SQE. */
static struct __kernel_timespec link_ts;

/* --- user_data: op (8 bits) | generation (24 bits) | fd (32 bits) ----------- */

static __u64 ud(enum op op, uint32_t gen, int fd)
{
	return ((__u64)op << 56) | ((__u64)(gen & 0xffffff) << 32) | (uint32_t)fd;
}

static enum op ud_op(__u64 u) { return (enum op)(u >> 56); }
static uint32_t ud_gen(__u64 u) { return (uint32_t)(u >> 32) & 0xffffff; }
static int ud_fd(__u64 u) { return (int)(uint32_t)u; }

static void die(const char *what, int err)
{
	fprintf(stderr, PROG ": %s: %s\n", what, strerror(err));
	exit(1);
}

/* Whether io_uring_submit enters the kernel for what is queued (liburing's
 * rule): always without SQPOLL; with it, only to wake a sleeping
 * submission thread. Counted, so SQEs per enter stay honest under SQPOLL. */
static int submit_enters(struct uring_ctx *r)
{
	if (!io_uring_sq_ready(&r->ring))
		return 0;
	if (!o.ring.sqpoll)
		return 1;
	return (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP) != 0;
}

/* Submit what is queued so the SQ has room for n more entries. With SQPOLL
 * the kernel thread consumes the SQ asynchronously, so wait for it. */
static void make_room(struct uring_ctx *r, unsigned n)
{
	while (io_uring_sq_space_left(&r->ring) < n) {
		int enters = submit_enters(r);
		int ret = io_uring_submit(&r->ring);

		if (ret < 0)
			die("io_uring_submit", -ret);
		r->c.enters += (uint64_t)enters;
		r->c.submits++;
		r->c.sqes += (uint64_t)ret;
		if (io_uring_sq_space_left(&r->ring) >= n)
			break;
		if (o.ring.sqpoll) {
			ret = io_uring_sqring_wait(&r->ring);
			if (ret < 0 && ret != -EINTR)
				die("io_uring_sqring_wait", -ret);
		}
	}
}

static struct io_uring_sqe *sqe_get(struct uring_ctx *r)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

	if (!sqe) {
		make_room(r, 1);
		sqe = io_uring_get_sqe(&r->ring);
		if (!sqe)
			die("io_uring_get_sqe", EBUSY);
	}
	return sqe;
}

/* Flags every data SQE gets from the command line. */
static void data_flags(struct uring_ctx *r, struct io_uring_sqe *sqe)
{
	if (o.fixed_files)
		sqe->flags |= IOSQE_FIXED_FILE;
	if (o.async) {
		sqe->flags |= IOSQE_ASYNC;
		r->c.async_sqes++;
	}
	if (o.drain)
		sqe->flags |= IOSQE_IO_DRAIN;
}

/* --- provided buffers -------------------------------------------------------- */

static char *buf_addr(struct uring_ctx *r, int bid)
{
	return r->bufs + (size_t)bid * o.buf_size;
}

static void arm_recv(struct uring_ctx *r, int fd);

/* Whether fd has received bytes not yet read (or that cannot be told). */
static int has_unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) != 0 || n > 0;
}

static void buf_return(struct uring_ctx *r, int bid)
{
	r->bufs_held--;
	if (o.buf_ring) {
		io_uring_buf_ring_add(r->br, buf_addr(r, bid), o.buf_size, (unsigned short)bid,
				      io_uring_buf_ring_mask(o.buf_count), 0);
		io_uring_buf_ring_advance(r->br, 1);
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, buf_addr(r, bid), (int)o.buf_size, 1, 0, bid);
		io_uring_sqe_set_data64(sqe, ud(OP_PROVIDE, 0, 0));
	}
	/* A buffer is back: give a starved connection its receive again. A
	 * receive armed on a socket with nothing to read takes no buffer (a
	 * connection whose multishot receive ended with ENOBUFS after its data
	 * was read is one), so this buffer would wake nobody and every later
	 * starved connection would wait forever: keep arming until one that
	 * has bytes waiting is armed. */
	while (r->nstarved) {
		int fd = r->starved[--r->nstarved];

		if (r->conns[fd].open && !r->conns[fd].closing && !r->conns[fd].recv_armed) {
			arm_recv(r, fd);
			if (has_unread(fd))
				break;
		}
	}
}

static void setup_buffers(struct uring_ctx *r)
{
	if (!o.buf_ring && !o.buf_select)
		return;
	if (posix_memalign((void **)&r->bufs, 4096, (size_t)o.buf_count * o.buf_size) != 0)
		die("allocating provided buffers", ENOMEM);
	if (o.buf_ring) {
		struct io_uring_buf_reg reg;
		int ret;

		if (posix_memalign((void **)&r->br, 4096, o.buf_count * sizeof(struct io_uring_buf)) != 0)
			die("allocating the buffer ring", ENOMEM);
		io_uring_buf_ring_init(r->br);
		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (unsigned long)r->br;
		reg.ring_entries = o.buf_count;
		reg.bgid = 0;
		ret = io_uring_register_buf_ring(&r->ring, &reg, 0);
		if (ret < 0) {
			fprintf(stderr, PROG ": --buf-ring: kernel refused io_uring_register_buf_ring: %s\n",
				strerror(-ret));
			exit(2);
		}
		for (unsigned i = 0; i < o.buf_count; i++)
			io_uring_buf_ring_add(r->br, buf_addr(r, (int)i), o.buf_size, (unsigned short)i,
					      io_uring_buf_ring_mask(o.buf_count), (int)i);
		io_uring_buf_ring_advance(r->br, (int)o.buf_count);
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, r->bufs, (int)o.buf_size, (int)o.buf_count, 0, 0);
		io_uring_sqe_set_data64(sqe, ud(OP_PROVIDE, 0, 0));
	}
}

/* --- connection life cycle ------------------------------------------------------ */

static void arm_accept(struct uring_ctx *r)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	if (o.multishot_accept)
		io_uring_prep_multishot_accept(sqe, r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	else
		io_uring_prep_accept(sqe, r->listen_fd, NULL, NULL, SOCK_CLOEXEC);
	io_uring_sqe_set_data64(sqe, ud(OP_ACCEPT, 0, 0));
}

static void arm_recv(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct io_uring_sqe *sqe;

	/* A receive and its link timeout must go in the same submission. */
	make_room(r, o.link_timeout_ms > 0 ? 2 : 1);
	sqe = sqe_get(r);
	int provided = o.buf_ring || o.buf_select;

	if (o.multishot_recv)
		io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
	else
		io_uring_prep_recv(sqe, fd, provided ? NULL : c->buf, o.buf_size, 0);
	if (provided) {
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = 0;
	}
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_RECV, c->gen, fd));
	c->recv_armed = 1;
	if (o.link_timeout_ms > 0) {
		struct io_uring_sqe *t = sqe_get(r);   /* reserve() kept a slot */

		sqe->flags |= o.hardlink ? IOSQE_IO_HARDLINK : IOSQE_IO_LINK;
		io_uring_prep_link_timeout(t, &link_ts, 0);
		io_uring_sqe_set_data64(t, ud(OP_TIMEOUT, c->gen, fd));
	}
}

/* Release a chunk's data: a provided buffer goes back to the ring. */
static void chunk_free(struct uring_ctx *r, struct chunk *ch)
{
	if (ch->bid >= 0)
		buf_return(r, ch->bid);
	else if (ch->bid == COPIED)
		free(ch->data);
	free(ch);
}

/* Drop every chunk still queued on a connection, giving provided buffers back. */
static void drop_queue(struct uring_ctx *r, struct uconn *c)
{
	while (c->head) {
		struct chunk *ch = c->head;

		c->head = ch->next;
		chunk_free(r, ch);
	}
	c->tail = NULL;
	c->queued = 0;
}

/* Forget a connection that waits for a buffer: its fd may be reused. */
static void unstarve(struct uring_ctx *r, int fd)
{
	for (size_t i = 0; i < r->nstarved; i++)
		if (r->starved[i] == fd) {
			r->starved[i] = r->starved[--r->nstarved];
			return;
		}
}

static void conn_close(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	unstarve(r, fd);
	drop_queue(r, c);
	if (o.fixed_files) {
		int minus_one = -1;

		(void)io_uring_register_files_update(&r->ring, (unsigned)fd, &minus_one, 1);
	}
	free(c->buf);
	close(fd);
	c->open = 0;
	c->buf = NULL;
	c->gen++;   /* CQEs still in flight for this fd are now stale */
	r->c.closed++;
}

static void conn_open(struct uring_ctx *r, int fd)
{
	struct uconn *c;

	if ((size_t)fd >= nconns || set_nodelay(fd) != 0) {
		close(fd);
		return;
	}
	c = &r->conns[fd];
	c->open = 1;
	c->closing = c->recv_armed = c->recv_cancelling = c->send_inflight = c->zc_wait = c->send_failed = 0;
	c->ring = r->idx;
	c->head = c->tail = NULL;
	c->queued = 0;
	if (!(o.buf_ring || o.buf_select)) {
		c->buf = malloc(o.buf_size);
		if (!c->buf) {
			close(fd);
			c->open = 0;
			return;
		}
	}
	if (o.fixed_files) {
		int ret = io_uring_register_files_update(&r->ring, (unsigned)fd, &fd, 1);

		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering fd %d: %s\n", fd, strerror(-ret));
			free(c->buf);
			close(fd);
			c->open = 0;
			return;
		}
	}
	r->c.accepted++;
	arm_recv(r, fd);
}

static void send_head(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct chunk *ch = c->head;
	struct io_uring_sqe *sqe = sqe_get(r);

	if (o.send_zc)
		io_uring_prep_send_zc(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL, 0);
	else
		io_uring_prep_send(sqe, fd, ch->data + ch->off, ch->len - ch->off, MSG_NOSIGNAL);
	data_flags(r, sqe);
	io_uring_sqe_set_data64(sqe, ud(OP_SEND, c->gen, fd));
	c->send_inflight = 1;
}

/* After a send finished (and its zero-copy notification, if any): release a
 * finished chunk, send the next, re-arm the receive, or close. */
static void after_send(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];
	struct chunk *ch = c->head;

	if (ch && ch->off == ch->len) {
		c->head = ch->next;
		if (!c->head)
			c->tail = NULL;
		c->queued--;
		chunk_free(r, ch);
	}
	if (c->head) {
		send_head(r, fd);
		return;
	}
	if (c->closing) {
		if (!c->recv_armed)
			conn_close(r, fd);
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
	if (!c->send_inflight && !c->zc_wait)
		send_head(r, fd);
}

static void cancel_recv(struct uring_ctx *r, int fd)
{
	struct io_uring_sqe *sqe = sqe_get(r);

	io_uring_prep_cancel64(sqe, ud(OP_RECV, r->conns[fd].gen, fd), 0);
	io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
	r->conns[fd].recv_cancelling = 1;
}

/* --- completions ------------------------------------------------------------------- */

static void on_recv(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];
	int has_buf = cqe->flags & IORING_CQE_F_BUFFER;
	int bid = has_buf ? (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT) : -1;
	int more = cqe->flags & IORING_CQE_F_MORE;

	if (has_buf)
		r->bufs_held++;
	if (stale) {
		if (has_buf)
			buf_return(r, bid);
		return;
	}
	if (!more) {
		c->recv_armed = 0;
		c->recv_cancelling = 0;
	}
	if (cqe->res > 0) {
		r->c.requests++;
		if (has_buf && c->queued >= MAX_QUEUED_CHUNKS / 2) {
			/* This connection's echo is backing up (a slow reader): keep
			 * its data in memory of its own and give the shared buffer
			 * back at once, so it cannot hold the buffers the other
			 * connections receive into. */
			char *copy = malloc((size_t)cqe->res);

			if (!copy)
				die("copying a received chunk", ENOMEM);
			memcpy(copy, buf_addr(r, bid), (size_t)cqe->res);
			buf_return(r, bid);
			queue_chunk(r, fd, copy, (unsigned)cqe->res, COPIED);
		} else {
			queue_chunk(r, fd, has_buf ? buf_addr(r, bid) : c->buf, (unsigned)cqe->res,
				    has_buf ? bid : OWN_BUFFER);
		}
		/* Backpressure: stop a multishot receive while this connection's
		 * queue is full; after_send re-arms it. */
		if (more && c->queued >= MAX_QUEUED_CHUNKS && !c->recv_cancelling)
			cancel_recv(r, fd);
		return;
	}
	if (has_buf)
		buf_return(r, bid);
	if (cqe->res == -ENOBUFS) {
		/* Every provided buffer is in use; re-armed when one returns
		 * (buf_return), or when this connection's queue drains. */
		r->c.nobufs++;
		if (c->head || c->recv_armed)
			return;
		/* Buffers may have come back between the kernel's failure and
		 * this completion; then no later return would wake this one. */
		if (r->bufs_held < o.buf_count)
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
	c->closing = 1;
	if (!c->head && !c->send_inflight && !c->zc_wait && !c->recv_armed)
		conn_close(r, fd);
}

/* A send failed (the peer is gone) and the kernel holds none of its
 * buffers any more: drop what the peer will never read, then close. */
static void end_failed_send(struct uring_ctx *r, int fd)
{
	struct uconn *c = &r->conns[fd];

	drop_queue(r, c);
	if (!c->recv_armed)
		conn_close(r, fd);
	else if (!c->recv_cancelling)
		cancel_recv(r, fd);
}

static void on_send(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale)
{
	struct uconn *c = &r->conns[fd];
	struct chunk *ch = c->head;

	if (stale)
		return;
	if (cqe->flags & IORING_CQE_F_NOTIF) {
		/* Zero-copy: the kernel no longer needs the buffer. */
		r->c.zc_notifs++;
		c->zc_wait = 0;
		if (c->send_failed)
			end_failed_send(r, fd);
		else
			after_send(r, fd);
		return;
	}
	c->send_inflight = 0;
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
	ch->off += (unsigned)cqe->res;
	if (ch->off < ch->len)
		r->c.short_writes++;
	if (cqe->flags & IORING_CQE_F_MORE) {
		c->zc_wait = 1;   /* after_send runs when the notification arrives */
		return;
	}
	after_send(r, fd);
}

static void route_or_open(struct uring_ctx *r, int fd)
{
	int target = o.granule > 0 ? (fd / o.granule) % o.rings : r->idx;

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

static void handle(struct uring_ctx *r, struct io_uring_cqe *cqe)
{
	__u64 u = io_uring_cqe_get_data64(cqe);
	int fd = ud_fd(u);
	int stale = fd >= 0 && (size_t)fd < nconns && (r->conns[fd].gen & 0xffffff) != ud_gen(u);

	switch (ud_op(u)) {
	case OP_ACCEPT:
		if (cqe->res >= 0)
			route_or_open(r, cqe->res);
		else if (cqe->res != -EINTR && cqe->res != -ECONNABORTED && cqe->res != -EAGAIN)
			fprintf(stderr, PROG ": accept: %s\n", strerror(-cqe->res));
		if (!(cqe->flags & IORING_CQE_F_MORE) && !atomic_load(&stopping))
			arm_accept(r);
		break;
	case OP_RECV:
		on_recv(r, cqe, fd, stale);
		break;
	case OP_SEND:
		on_send(r, cqe, fd, stale);
		break;
	case OP_TIMEOUT:
		if (cqe->res == -ETIME)
			r->c.timeouts++;
		break;
	case OP_HANDOFF:
		conn_open(r, fd);
		break;
	case OP_MSG:
		if (cqe->res < 0) {
			fprintf(stderr, PROG ": routing fd %d to another ring: %s\n", fd, strerror(-cqe->res));
			close(fd);
		}
		break;
	case OP_PROVIDE:
		if (cqe->res < 0)
			die("IORING_OP_PROVIDE_BUFFERS", -cqe->res);
		break;
	case OP_CANCEL:
	case OP_STOP:   /* only wakes the ring; its loop sees `stopping` */
		break;
	}
}

/* --- rings ------------------------------------------------------------------------------ */

static void refuse(const char *why)
{
	fprintf(stderr, PROG ": %s\n", why);
	exit(2);
}

static void check_combinations(void)
{
	const char *ring_conflict = ring_setup_conflict(&o.ring);

	if (ring_conflict)
		refuse(ring_conflict);
	if (o.buf_ring && o.buf_select)
		refuse("--buf-ring and --buf-select are alternatives; choose one");
	if (o.multishot_recv && !o.buf_ring && !o.buf_select)
		refuse("--multishot-recv needs provided buffers: add --buf-ring or --buf-select");
	if (o.link_timeout_ms > 0 && o.multishot_recv)
		refuse("--link-timeout applies to single-shot receives; it cannot be combined with --multishot-recv");
	if (o.hardlink && o.link_timeout_ms <= 0)
		refuse("--hardlink links the receive to its timeout; it needs --link-timeout");
	if (o.granule > 0 && o.rings < 2)
		refuse("--granule routes connections between rings; it needs --rings 2 or more");
	if (o.attach_wq && o.rings < 2)
		refuse("--attach-wq shares one io-wq between rings; it needs --rings 2 or more");
	if (o.buf_count == 0 || (o.buf_count & (o.buf_count - 1)) || o.buf_count > 32768)
		refuse("--buf-count must be a power of two up to 32768");
}

static void setup_ring(struct uring_ctx *r)
{
	struct ring_setup rs = o.ring;
	char why[256];
	unsigned features;
	int ret;

	if (o.attach_wq && r->idx > 0)
		rs.attach_wq_fd = rings[0].ring.ring_fd;
	if (ring_setup_init(&rs, &r->ring, &features, why, sizeof(why)) < 0)
		refuse(why);
	if (!(features & IORING_FEAT_FAST_POLL))
		refuse("this kernel lacks IORING_FEAT_FAST_POLL, which the server requires (Linux 5.7+)");
	if (o.fixed_files) {
		ret = io_uring_register_files_sparse(&r->ring, (unsigned)nconns);
		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering a %zu-slot file table: %s\n", nconns,
				strerror(-ret));
			exit(2);
		}
	}
	if (o.send_zc) {
		struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
		int ok = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);

		io_uring_free_probe(probe);
		if (!ok)
			refuse("unavailable: this kernel lacks IORING_OP_SEND_ZC (--send-zc)");
	}
	setup_buffers(r);
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

/* Ring 0: has a stop signal arrived? Then wake every other ring. */
static int check_stop(void)
{
	struct signalfd_siginfo si;
	ssize_t n = read(stop_fd, &si, sizeof(si));

	if (n < 0 && errno != EAGAIN && errno != EINTR)
		die("reading the stop signalfd", errno);
	if (n <= 0)
		return 0;
	atomic_store(&stopping, 1);
	for (int i = 1; i < o.rings; i++) {
		struct io_uring_sqe *sqe = sqe_get(&rings[0]);

		io_uring_prep_msg_ring(sqe, rings[i].ring.ring_fd, 0, ud(OP_STOP, 0, 0), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
	}
	if (o.rings > 1 && io_uring_submit(&rings[0].ring) < 0)
		die("waking the other rings", EIO);
	return 1;
}

static void *run_ring(void *arg)
{
	struct uring_ctx *r = arg;
	struct __kernel_timespec check_every = { .tv_sec = 0, .tv_nsec = STOP_CHECK_MS * 1000000L };
	uint64_t next_check = now_ns() + STOP_CHECK_MS * 1000000ull;

	if (r->listen_fd >= 0)
		arm_accept(r);
	while (!atomic_load(&stopping)) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		if (r->idx == 0) {
			/* Ring 0 waits at most STOP_CHECK_MS, and reads the signalfd
			 * at most that often: one read() per interval under load. */
			struct io_uring_cqe *first;

			ret = io_uring_submit_and_wait_timeout(&r->ring, &first, 1, &check_every, NULL);
			if (now_ns() >= next_check) {
				next_check = now_ns() + STOP_CHECK_MS * 1000000ull;
				if (check_stop())
					break;
			}
		} else {
			ret = io_uring_submit_and_wait(&r->ring, 1);
		}
		/* Waiting for a completion always enters the kernel (liburing). */
		r->c.waits++;
		r->c.enters++;
		if (ret < 0) {
			if (ret == -EINTR || ret == -EAGAIN || ret == -EBUSY || ret == -ETIME)
				continue;
			die("io_uring_submit_and_wait", -ret);
		}
		r->c.sqes += (uint64_t)ret;
		io_uring_for_each_cqe(&r->ring, head, cqe) {
			handle(r, cqe);
			seen++;
		}
		io_uring_cq_advance(&r->ring, seen);
		r->c.events += seen;
	}
	return NULL;
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
		"Rings:\n"
		"  --rings N            one ring per thread (default 1)\n"
		"  --granule G          ring 0 accepts; fd goes to ring (fd / G) %% N\n"
		"  -h, --help           show this help\n",
		IOLAB_LIBURING_VERSION);
}

int main(int argc, char **argv)
{
	enum {
		OPT_PORT = 256, OPT_BIND, OPT_ENTRIES, OPT_CQ, OPT_CLAMP, OPT_SQPOLL, OPT_IDLE, OPT_AFF, OPT_ATTACH,
		OPT_RDIS, OPT_COOP, OPT_TRF, OPT_SI, OPT_DEFER, OPT_REGFD, OPT_ASYNC, OPT_BSEL, OPT_BRING, OPT_BSIZE,
		OPT_BCOUNT, OPT_FIXED, OPT_LT, OPT_HARD, OPT_DRAIN, OPT_MSA, OPT_MSR, OPT_ZC, OPT_RINGS, OPT_GRAN,
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
		{ "fixed-files", no_argument, NULL, OPT_FIXED }, { "link-timeout", required_argument, NULL, OPT_LT },
		{ "hardlink", no_argument, NULL, OPT_HARD }, { "drain", no_argument, NULL, OPT_DRAIN },
		{ "multishot-accept", no_argument, NULL, OPT_MSA }, { "multishot-recv", no_argument, NULL, OPT_MSR },
		{ "send-zc", no_argument, NULL, OPT_ZC }, { "rings", required_argument, NULL, OPT_RINGS },
		{ "granule", required_argument, NULL, OPT_GRAN }, { "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct echo_counters total = { 0 };
	char config[1024];
	int opt, iowq;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case OPT_PORT: o.port = (int)parse_int_flag(PROG, "--port", optarg, 0, 65535); break;
		case OPT_BIND: o.bind = optarg; break;
		case OPT_ENTRIES: o.ring.entries = (unsigned)parse_int_flag(PROG, "--entries", optarg, 1, 32768); break;
		case OPT_CQ: o.ring.cq_size = (unsigned)parse_int_flag(PROG, "--cq-size", optarg, 1, 1 << 20); break;
		case OPT_CLAMP: o.ring.clamp = 1; break;
		case OPT_SQPOLL: o.ring.sqpoll = 1; break;
		case OPT_IDLE: o.ring.sq_thread_idle = (int)parse_int_flag(PROG, "--sq-thread-idle", optarg, 0, 3600000); break;
		case OPT_AFF: o.ring.sq_aff = (int)parse_int_flag(PROG, "--sq-aff", optarg, 0, 4095); break;
		case OPT_ATTACH: o.attach_wq = 1; break;
		case OPT_RDIS: o.ring.r_disabled = 1; break;
		case OPT_COOP: o.ring.coop_taskrun = 1; break;
		case OPT_TRF: o.ring.taskrun_flag = 1; break;
		case OPT_SI: o.ring.single_issuer = 1; break;
		case OPT_DEFER: o.ring.defer_taskrun = 1; break;
		case OPT_REGFD: o.ring.register_ring_fd = 1; break;
		case OPT_ASYNC: o.async = 1; break;
		case OPT_BSEL: o.buf_select = 1; break;
		case OPT_BRING: o.buf_ring = 1; break;
		case OPT_BSIZE: o.buf_size = (unsigned)parse_int_flag(PROG, "--buf-size", optarg, 1, 1 << 20); break;
		case OPT_BCOUNT: o.buf_count = (unsigned)parse_int_flag(PROG, "--buf-count", optarg, 1, 32768); break;
		case OPT_FIXED: o.fixed_files = 1; break;
		case OPT_LT: o.link_timeout_ms = (int)parse_int_flag(PROG, "--link-timeout", optarg, 1, 3600000); break;
		case OPT_HARD: o.hardlink = 1; break;
		case OPT_DRAIN: o.drain = 1; break;
		case OPT_MSA: o.multishot_accept = 1; break;
		case OPT_MSR: o.multishot_recv = 1; break;
		case OPT_ZC: o.send_zc = 1; break;
		case OPT_RINGS: o.rings = (int)parse_int_flag(PROG, "--rings", optarg, 1, 1024); break;
		case OPT_GRAN: o.granule = (int)parse_int_flag(PROG, "--granule", optarg, 1, 1 << 20); break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, PROG ": bad option; see --help\n"); return 2;
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
	require_flag(PROG, o.port >= 0, "--port");
	check_combinations();
	link_ts.tv_sec = o.link_timeout_ms / 1000;
	link_ts.tv_nsec = (long long)(o.link_timeout_ms % 1000) * 1000000;
	install_stop_handlers();   /* SIGPIPE ignored; SIGTERM/SIGINT are blocked below */
	{
		/* Block the stop signals before any thread starts (threads inherit
		 * the mask); ring 0 reads them from a signalfd. */
		sigset_t stop;
		int err;

		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		if ((err = pthread_sigmask(SIG_BLOCK, &stop, NULL)) != 0)
			die("pthread_sigmask", err);
		stop_fd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
		if (stop_fd < 0)
			die("signalfd", errno);
	}
	nconns = raise_nofile(PROG);
	rings = calloc((size_t)o.rings, sizeof(*rings));
	if (!rings)
		die("allocating the rings", ENOMEM);
	for (int i = 0; i < o.rings; i++) {
		struct uring_ctx *r = &rings[i];

		r->idx = i;
		r->listen_fd = -1;
		r->conns = calloc(nconns, sizeof(*r->conns));
		r->starved = calloc(nconns, sizeof(*r->starved));
		if (!r->conns || !r->starved) {
			fprintf(stderr, PROG ": out of memory for %zu connections per ring\n", nconns);
			return 1;
		}
		if (i == 0 || o.granule == 0) {
			r->listen_fd = listen_tcp(PROG, o.bind, o.port, o.rings > 1, 0);
			if (o.port == 0) {
				struct sockaddr_in a;
				socklen_t al = sizeof(a);

				if (getsockname(r->listen_fd, (struct sockaddr *)&a, &al) != 0)
					die("getsockname", errno);
				o.port = ntohs(a.sin_port);
			}
		}
		setup_ring(r);
	}
	fprintf(stderr, PROG ": listening on %s:%d\n", o.bind, o.port);
	for (int i = 1; i < o.rings; i++) {
		int err = pthread_create(&rings[i].thread, NULL, run_ring, &rings[i]);

		if (err != 0)
			die("pthread_create", err);
	}
	run_ring(&rings[0]);
	for (int i = 1; i < o.rings; i++)
		pthread_join(rings[i].thread, NULL);
	close(stop_fd);
	iowq = iowq_workers();
	for (int i = 0; i < o.rings; i++)
		counters_add(&total, &rings[i].c);
	for (int i = 0; i < o.rings; i++) {
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
			close((int)fd);
		}
	}
	for (int i = 0; i < o.rings; i++) {
		io_uring_queue_exit(&rings[i].ring);
		if (rings[i].listen_fd >= 0)
			close(rings[i].listen_fd);
		free(rings[i].bufs);
		free(rings[i].br);
		free(rings[i].starved);
		free(rings[i].conns);
	}
	snprintf(config, sizeof(config),
		 "{\"bind\": \"%s\", \"port\": %d, \"entries\": %u, \"cq_size\": %u, \"clamp\": %d, "
		 "\"sqpoll\": %d, \"sq_thread_idle\": %d, \"sq_aff\": %d, \"attach_wq\": %d, "
		 "\"r_disabled\": %d, \"coop_taskrun\": %d, \"taskrun_flag\": %d, \"single_issuer\": %d, "
		 "\"defer_taskrun\": %d, \"register_ring_fd\": %d, \"async\": %d, \"buf_select\": %d, "
		 "\"buf_ring\": %d, \"buf_size\": %u, \"buf_count\": %u, \"fixed_files\": %d, "
		 "\"link_timeout_ms\": %d, \"hardlink\": %d, \"drain\": %d, \"multishot_accept\": %d, "
		 "\"multishot_recv\": %d, \"send_zc\": %d, \"rings\": %d, \"granule\": %d, "
		 "\"iowq_workers_at_exit\": %d, \"liburing\": \"%s\"}",
		 o.bind, o.port, o.ring.entries, o.ring.cq_size, o.ring.clamp, o.ring.sqpoll, o.ring.sq_thread_idle, o.ring.sq_aff,
		 o.attach_wq, o.ring.r_disabled, o.ring.coop_taskrun, o.ring.taskrun_flag, o.ring.single_issuer,
		 o.ring.defer_taskrun, o.ring.register_ring_fd, o.async, o.buf_select, o.buf_ring, o.buf_size,
		 o.buf_count, o.fixed_files, o.link_timeout_ms, o.hardlink, o.drain, o.multishot_accept,
		 o.multishot_recv, o.send_zc, o.rings, o.granule, iowq, IOLAB_LIBURING_VERSION);
	print_final(stdout, "uring", &total, config);
	free(rings);
	return 0;
}
