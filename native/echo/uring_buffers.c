/* echo-uring: provided buffers (a buffer ring or legacy PROVIDE_BUFFERS),
 * and the connections whose receive found none, re-armed as buffers return. */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "../common/uring_compat.h"
#include "echo_uring.h"

char *buf_addr(struct uring_ctx *r, int bid)
{
	return r->bufs + (size_t)bid * r->o->buf_size;
}

/* Whether fd has received bytes not yet read (or that cannot be told). */
static int has_unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) != 0 || n > 0;
}

/* Put buffer bid at the ring's tail, noting its position (bundles). */
static void ring_add(struct uring_ctx *r, int bid, int offset)
{
	io_uring_buf_ring_add(r->br, buf_addr(r, bid), r->o->buf_size, (unsigned short)bid,
			      io_uring_buf_ring_mask(r->o->buf_count), offset);
	if (r->slot_bid) {
		uint64_t pos = r->ring_tail + (uint64_t)offset;

		r->slot_bid[pos & (r->o->buf_count - 1)] = (unsigned short)bid;
		r->pos_of_bid[bid] = pos;
	}
	if (r->inc_used) {
		r->inc_used[bid] = 0;
		r->inc_retired[bid] = 0;
	}
}

void buf_return(struct uring_ctx *r, int bid)
{
	r->bufs_held--;
	if (r->o->buf_ring) {
		ring_add(r, bid, 0);
		io_uring_buf_ring_advance(r->br, 1);
		r->ring_tail++;
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, buf_addr(r, bid), (int)r->o->buf_size, 1, 0, bid);
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

/* Register br (page-aligned, `entries` slots) as buffer group bgid of r's
 * ring, incremental (IOU_PBUF_RING_INC) if asked: the receive ring and
 * each connection's send ring (--send-bundle). Returns 0 or -errno. */
int register_buf_ring(struct uring_ctx *r, struct io_uring_buf_ring *br, unsigned entries, unsigned short bgid,
		      int incremental)
{
	struct io_uring_buf_reg reg;

	memset(&reg, 0, sizeof(reg));
	reg.ring_addr = (unsigned long)br;
	reg.ring_entries = entries;
	reg.bgid = bgid;
	if (incremental)
		IOLAB_SET_BUF_REG_FLAGS(reg, IOLAB_PBUF_RING_INC);
	return io_uring_register_buf_ring(&r->ring, &reg, 0);
}

void setup_buffers(struct uring_ctx *r)
{
	if (!r->o->buf_ring && !r->o->buf_select)
		return;
	if (posix_memalign((void **)&r->bufs, 4096, (size_t)r->o->buf_count * r->o->buf_size) != 0)
		die("allocating provided buffers", ENOMEM);
	if (r->o->zc_fixed) {
		struct iovec area = { r->bufs, (size_t)r->o->buf_count * r->o->buf_size };
		int ret = io_uring_register_buffers(&r->ring, &area, 1);

		if (ret < 0) {
			fprintf(stderr, PROG ": --zc-fixed: the kernel refused to register the %zu-byte buffer area: %s%s\n",
				area.iov_len, strerror(-ret),
				ret == -ENOMEM ? " (raise the locked-memory limit, ulimit -l, or use fewer --buf-count)" : "");
			exit(2);
		}
	}
	if (r->o->buf_ring) {
		int ret;

		if (posix_memalign((void **)&r->br, 4096, r->o->buf_count * sizeof(struct io_uring_buf)) != 0)
			die("allocating the buffer ring", ENOMEM);
		io_uring_buf_ring_init(r->br);
		ret = register_buf_ring(r, r->br, r->o->buf_count, 0, r->o->buf_inc);
		if (ret < 0 && r->o->buf_inc) {
			fprintf(stderr, PROG ": unavailable: the kernel refused an incremental buffer ring "
				"(IOU_PBUF_RING_INC, Linux 6.12+): %s\n", strerror(-ret));
			exit(2);
		}
		if (ret < 0) {
			fprintf(stderr, PROG ": --buf-ring: kernel refused io_uring_register_buf_ring: %s\n",
				strerror(-ret));
			exit(2);
		}
		if (r->o->recv_bundle) {
			r->slot_bid = calloc(r->o->buf_count, sizeof(*r->slot_bid));
			r->pos_of_bid = calloc(r->o->buf_count, sizeof(*r->pos_of_bid));
			r->bundle_bids = calloc(r->o->buf_count, sizeof(*r->bundle_bids));
			if (!r->slot_bid || !r->pos_of_bid || !r->bundle_bids)
				die("allocating the bundle slot table", ENOMEM);
		}
		if (r->o->buf_inc) {
			r->inc_used = calloc(r->o->buf_count, sizeof(*r->inc_used));
			r->inc_refs = calloc(r->o->buf_count, sizeof(*r->inc_refs));
			r->inc_retired = calloc(r->o->buf_count, sizeof(*r->inc_retired));
			if (!r->inc_used || !r->inc_refs || !r->inc_retired)
				die("allocating the incremental buffer table", ENOMEM);
		}
		for (unsigned i = 0; i < r->o->buf_count; i++)
			ring_add(r, (int)i, (int)i);
		io_uring_buf_ring_advance(r->br, (int)r->o->buf_count);
		r->ring_tail += r->o->buf_count;
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, r->bufs, (int)r->o->buf_size, (int)r->o->buf_count, 0, 0);
		io_uring_sqe_set_data64(sqe, ud(OP_PROVIDE, 0, 0));
	}
}

/* The bin of recv_bufs_hist (send_bufs_hist) for a receive (send) that
 * took (carried) n buffers. */
unsigned bufs_hist_bin(unsigned n)
{
	unsigned bin = 0;

	for (unsigned top = 1; bin < BUFS_HIST_BINS - 1 && n > top; top <<= 1)
		bin++;
	return bin;
}

/* Take a piece of `take` bytes of incremental buffer bid: one more chunk
 * points into it; once the kernel has used it up (retired) it is the
 * program's until every such chunk is done (buf_release). */
static void inc_take(struct uring_ctx *r, int bid, unsigned take, int retired)
{
	r->inc_used[bid] += take;
	r->inc_refs[bid]++;
	if (retired) {
		r->inc_retired[bid] = 1;
		r->bufs_held++;
	}
}

/* The buffers a receive completion with data filled, in order: their ids
 * into bids (at most max) and where the first byte is (*data). Takes the
 * buffers into the program's hands (bufs_held) and counts them. With
 * --buf-inc a completion uses part of a buffer, which stays in the ring
 * while the kernel sets IORING_CQE_F_BUF_MORE; a bundle of incremental
 * buffers starts where the last one left its first buffer, uses up every
 * buffer before its last, and leaves the last for more by the same flag.
 * Each piece's length follows from where it starts (queue_received). */
unsigned recv_buffers(struct uring_ctx *r, struct io_uring_cqe *cqe, int *bids, unsigned max, char **data)
{
	int first = (int)(cqe->flags >> IORING_CQE_BUFFER_SHIFT);
	int more = (cqe->flags & IORING_CQE_F_BUF_MORE) != 0;
	unsigned n = 1;

	bids[0] = first;
	if (r->o->buf_inc) {
		unsigned left = cqe->res > 0 ? (unsigned)cqe->res : 0;

		*data = buf_addr(r, first) + r->inc_used[first];
		if (more)
			r->c.buf_more++;
		if (!r->o->recv_bundle || left <= r->o->buf_size - r->inc_used[first]) {
			inc_take(r, first, left, !more);
		} else {
			/* A bundle over several buffers, in ring order from the first. */
			left -= r->o->buf_size - r->inc_used[first];
			inc_take(r, first, r->o->buf_size - r->inc_used[first], 1);
			while (left) {
				int bid = r->slot_bid[(r->pos_of_bid[first] + n) & (r->o->buf_count - 1)];
				unsigned take = left < r->o->buf_size ? left : r->o->buf_size;

				if (n == max)
					die("a bundle took more buffers than the ring holds", EOVERFLOW);
				left -= take;
				/* The kernel's flag and our count must agree on the last. */
				if (!left && more != (take < r->o->buf_size))
					die("a bundle's last incremental buffer: the kernel's BUF_MORE and the "
					    "bytes counted here disagree", EPROTO);
				inc_take(r, bid, take, left || !more);
				bids[n++] = bid;
			}
		}
	} else {
		if (r->o->recv_bundle && cqe->res > 0)
			n = ((unsigned)cqe->res + r->o->buf_size - 1) / r->o->buf_size;
		if (n > max)
			die("a bundle took more buffers than the ring holds", EOVERFLOW);
		for (unsigned i = 1; i < n; i++)
			bids[i] = r->slot_bid[(r->pos_of_bid[first] + i) & (r->o->buf_count - 1)];
		*data = buf_addr(r, first);
		r->bufs_held += n;
	}
	if (cqe->res > 0) {
		r->c.recv_buffers += n;
		r->c.recv_bufs_hist[bufs_hist_bin(n)]++;
	}
	return n;
}

/* A chunk is done with buffer bid: back to the ring, or with --buf-inc
 * once the kernel retired it and no other chunk points into it. */
void buf_release(struct uring_ctx *r, int bid)
{
	if (!r->o->buf_inc) {
		buf_return(r, bid);
		return;
	}
	if (--r->inc_refs[bid] == 0 && r->inc_retired[bid]) {
		r->c.bufs_retired++;
		buf_return(r, bid);
	}
}

/* Forget a connection that waits for a buffer: its fd may be reused. */
void unstarve(struct uring_ctx *r, int fd)
{
	for (size_t i = 0; i < r->nstarved; i++)
		if (r->starved[i] == fd) {
			r->starved[i] = r->starved[--r->nstarved];
			return;
		}
}
