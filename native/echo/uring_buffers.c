/* echo-uring: provided buffers (a buffer ring or legacy PROVIDE_BUFFERS),
 * and the connections whose receive found none, re-armed as buffers return. */
#define _GNU_SOURCE
#include <errno.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "echo_uring.h"

char *buf_addr(struct uring_ctx *r, int bid)
{
	return r->bufs + (size_t)bid * opts.buf_size;
}

/* Whether fd has received bytes not yet read (or that cannot be told). */
static int has_unread(int fd)
{
	int n = 0;

	return ioctl(fd, FIONREAD, &n) != 0 || n > 0;
}

void buf_return(struct uring_ctx *r, int bid)
{
	r->bufs_held--;
	if (opts.buf_ring) {
		io_uring_buf_ring_add(r->br, buf_addr(r, bid), opts.buf_size, (unsigned short)bid,
				      io_uring_buf_ring_mask(opts.buf_count), 0);
		io_uring_buf_ring_advance(r->br, 1);
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, buf_addr(r, bid), (int)opts.buf_size, 1, 0, bid);
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

void setup_buffers(struct uring_ctx *r)
{
	if (!opts.buf_ring && !opts.buf_select)
		return;
	if (posix_memalign((void **)&r->bufs, 4096, (size_t)opts.buf_count * opts.buf_size) != 0)
		die("allocating provided buffers", ENOMEM);
	if (opts.buf_ring) {
		struct io_uring_buf_reg reg;
		int ret;

		if (posix_memalign((void **)&r->br, 4096, opts.buf_count * sizeof(struct io_uring_buf)) != 0)
			die("allocating the buffer ring", ENOMEM);
		io_uring_buf_ring_init(r->br);
		memset(&reg, 0, sizeof(reg));
		reg.ring_addr = (unsigned long)r->br;
		reg.ring_entries = opts.buf_count;
		reg.bgid = 0;
		ret = io_uring_register_buf_ring(&r->ring, &reg, 0);
		if (ret < 0) {
			fprintf(stderr, PROG ": --buf-ring: kernel refused io_uring_register_buf_ring: %s\n",
				strerror(-ret));
			exit(2);
		}
		for (unsigned i = 0; i < opts.buf_count; i++)
			io_uring_buf_ring_add(r->br, buf_addr(r, (int)i), opts.buf_size, (unsigned short)i,
					      io_uring_buf_ring_mask(opts.buf_count), (int)i);
		io_uring_buf_ring_advance(r->br, (int)opts.buf_count);
	} else {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_provide_buffers(sqe, r->bufs, (int)opts.buf_size, (int)opts.buf_count, 0, 0);
		io_uring_sqe_set_data64(sqe, ud(OP_PROVIDE, 0, 0));
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
