/* echo-uring: submitting SQEs (counting the kernel entries they cost) and
 * the loop each ring's thread runs, dispatching completions by operation.
 * Ring 0 also reads the stop signals and wakes the other rings. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include "../common/timing.h"
#include "../common/uring_compat.h"
#include "echo_uring.h"

void die(const char *what, int err)
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
	if (!r->o->ring.sqpoll)
		return 1;
	return (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP) != 0;
}

/* Submit what is queued so the SQ has room for n more entries. With SQPOLL
 * the kernel thread consumes the SQ asynchronously, so wait for it. */
void make_room(struct uring_ctx *r, unsigned n)
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
		if (r->o->ring.sqpoll) {
			ret = io_uring_sqring_wait(&r->ring);
			if (ret < 0 && ret != -EINTR)
				die("io_uring_sqring_wait", -ret);
		}
	}
}

struct io_uring_sqe *sqe_get(struct uring_ctx *r)
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
void data_flags(struct uring_ctx *r, struct io_uring_sqe *sqe)
{
	if (r->o->fixed_files)
		sqe->flags |= IOSQE_FIXED_FILE;
	if (r->o->async) {
		sqe->flags |= IOSQE_ASYNC;
		r->c.async_sqes++;
	}
	if (r->o->drain)
		sqe->flags |= IOSQE_IO_DRAIN;
}

static struct __kernel_timespec accept_pause_ts = { .tv_sec = 0, .tv_nsec = ACCEPT_PAUSE_MS * 1000000L };

static void handle(struct uring_ctx *r, struct io_uring_cqe *cqe)
{
	__u64 u = io_uring_cqe_get_data64(cqe);
	int fd = ud_fd(u);
	int stale = fd >= 0 && (size_t)fd < r->s->nconns && (r->conns[fd].gen & 0xffffff) != ud_gen(u);

	switch (ud_op(u)) {
	case OP_ACCEPT:
		if (cqe->res >= 0) {
			route_or_open(r, cqe->res);
		} else if (accept_should_pause(-cqe->res)) {
			/* Accepting again at once would fail again: pause (a still
			 * armed multishot accept is cancelled first). */
			accept_paused(PROG, &r->pause, -cqe->res);
			if (!r->accept_paused && (cqe->flags & IORING_CQE_F_MORE)) {
				struct io_uring_sqe *sqe = sqe_get(r);

				io_uring_prep_cancel64(sqe, ud(OP_ACCEPT, 0, 0), 0);
				io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
			}
			r->accept_paused = 1;
		} else if (cqe->res != -EINTR && cqe->res != -ECONNABORTED && cqe->res != -EAGAIN
			   && cqe->res != -ECANCELED) {
			fprintf(stderr, PROG ": accept: %s\n", strerror(-cqe->res));
		}
		if (!(cqe->flags & IORING_CQE_F_MORE) && !atomic_load(&r->s->stopping)) {
			if (r->accept_paused) {
				struct io_uring_sqe *sqe = sqe_get(r);

				io_uring_prep_timeout(sqe, &accept_pause_ts, 0, 0);
				io_uring_sqe_set_data64(sqe, ud(OP_RESUME, 0, 0));
			} else {
				arm_accept(r);
			}
		}
		break;
	case OP_RESUME:
		r->accept_paused = 0;
		if (!atomic_load(&r->s->stopping))
			arm_accept(r);
		break;
	case OP_RECV:
		on_recv(r, cqe, fd, stale);
		break;
	case OP_SEND:
		on_send(r, cqe, fd, stale);
		break;
	case OP_POLL:
		on_poll(r, cqe, fd, stale);
		break;
	case OP_POLLOUT:
		on_pollout(r, cqe, fd, stale);
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

/* Ring 0: has a stop signal arrived? Then wake every other ring. */
static int check_stop(struct uring_ctx *r)
{
	struct signalfd_siginfo si;
	ssize_t n = read(r->s->stop_fd, &si, sizeof(si));

	if (n < 0 && errno != EAGAIN && errno != EINTR)
		die("reading the stop signalfd", errno);
	if (n <= 0)
		return 0;
	atomic_store(&r->s->stopping, 1);
	for (int i = 1; i < r->o->rings; i++) {
		struct io_uring_sqe *sqe = sqe_get(r);

		io_uring_prep_msg_ring(sqe, r->s->rings[i].ring.ring_fd, 0, ud(OP_STOP, 0, 0), 0);
		io_uring_sqe_set_data64(sqe, ud(OP_CANCEL, 0, 0));
	}
	if (r->o->rings > 1 && io_uring_submit(&r->ring) < 0)
		die("waking the other rings", EIO);
	return 1;
}

/* Publish the queued SQEs to the kernel, as liburing's submit does before
 * it enters (its flush is not exported): fill their SQ array slots, then
 * move the tail. Returns how many the kernel has yet to consume. */
static unsigned flush_sq(struct io_uring *ring)
{
	struct io_uring_sq *sq = &ring->sq;
	unsigned tail = sq->sqe_tail;

	if (sq->array)
		for (unsigned i = sq->sqe_head; i != tail; i++)
			sq->array[i & sq->ring_mask] = i & sq->ring_mask;
	sq->sqe_head = tail;
	io_uring_smp_store_release(sq->ktail, tail);
	return tail - io_uring_smp_load_acquire(sq->khead);
}

/* Submit what is queued and wait for r->o->wait_nr completions, returning
 * after r->o->min_wait_us with those that arrived (at least one), or at
 * `ts` with none: one io_uring_enter with IORING_ENTER_EXT_ARG, which
 * liburing 2.3 cannot pass min_wait_usec through. With --reg-wait the
 * same timeout and minimum wait come from the ring's registered region
 * (set up with them): the argument is entry 0's offset, 0, and EXT_ARG
 * stays set (without it the kernel reads the argument as a sigset pointer
 * and the wait has no timeout). Returns the SQEs submitted, or -errno. */
static int submit_and_wait_batched(struct uring_ctx *r, struct __kernel_timespec *ts)
{
	struct io_uring_getevents_arg arg = { .sigmask = 0, .sigmask_sz = _NSIG / 8,
					      .ts = (__u64)(uintptr_t)ts };
	unsigned flags = IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG | (r->o->reg_wait ? IOLAB_ENTER_EXT_ARG_REG : 0);
	void *argp = r->o->reg_wait ? NULL : &arg;
	size_t argsz = r->o->reg_wait ? sizeof(struct iolab_reg_wait) : sizeof(arg);
	unsigned submit = flush_sq(&r->ring);
	int fd = r->ring.ring_fd;

	IOLAB_GETEVENTS_MIN_WAIT(arg) = r->o->min_wait_us;
	if (r->o->ring.sqpoll && (IO_URING_READ_ONCE(*r->ring.sq.kflags) & IORING_SQ_NEED_WAKEUP))
		flags |= IORING_ENTER_SQ_WAKEUP;
	if (r->o->ring.register_ring_fd) {
		fd = r->ring.enter_ring_fd;
		flags |= IORING_ENTER_REGISTERED_RING;
	}
	/* liburing's wrapper returns -errno itself and leaves errno alone. */
	return io_uring_enter2((unsigned)fd, submit, r->o->wait_nr, flags, (sigset_t *)argp, argsz);
}

void *run_ring(void *arg)
{
	struct uring_ctx *r = arg;
	struct __kernel_timespec check_every = { .tv_sec = 0, .tv_nsec = STOP_CHECK_MS * 1000000L };
	uint64_t next_check = now_ns() + STOP_CHECK_MS * 1000000ull;

	if (r->listen_fd >= 0)
		arm_accept(r);
	while (!atomic_load(&r->s->stopping)) {
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		int ret;

		if (r->idx == 0) {
			/* Ring 0 waits at most STOP_CHECK_MS, and reads the signalfd
			 * at most that often: one read() per interval under load. */
			struct io_uring_cqe *first;

			ret = r->o->min_wait_us || r->o->reg_wait ? submit_and_wait_batched(r, &check_every)
					       : io_uring_submit_and_wait_timeout(&r->ring, &first, 1, &check_every, NULL);
			if (now_ns() >= next_check) {
				next_check = now_ns() + STOP_CHECK_MS * 1000000ull;
				if (check_stop(r))
					break;
			}
		} else {
			ret = r->o->min_wait_us || r->o->reg_wait ? submit_and_wait_batched(r, NULL)
							       : io_uring_submit_and_wait(&r->ring, 1);
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
