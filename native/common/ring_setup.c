/* io_uring_params from a ring_setup, and the steps after io_uring_setup. */
#define _GNU_SOURCE
#include "ring_setup.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "config.h"
#include "uring_compat.h"

const char *ring_setup_conflict(const struct ring_setup *rs)
{
	if (rs->sqpoll && rs->coop_taskrun)
		return "--sqpoll cannot be combined with --coop-taskrun (the kernel refuses SQPOLL with COOP_TASKRUN)";
	if (rs->sqpoll && rs->defer_taskrun)
		return "--sqpoll cannot be combined with --defer-taskrun (the kernel refuses SQPOLL with DEFER_TASKRUN)";
	if (rs->defer_taskrun && !rs->single_issuer)
		return "--defer-taskrun needs --single-issuer (the kernel requires SINGLE_ISSUER for DEFER_TASKRUN)";
	if (rs->taskrun_flag && !rs->coop_taskrun && !rs->defer_taskrun)
		return "--taskrun-flag needs --coop-taskrun or --defer-taskrun";
	if ((rs->sq_aff >= 0 || rs->sq_thread_idle >= 0) && !rs->sqpoll)
		return "--sq-aff and --sq-thread-idle need --sqpoll";
#ifndef HAVE_DEFER_TASKRUN
	if (rs->defer_taskrun || rs->single_issuer)
		return "unavailable: liburing " IOLAB_LIBURING_VERSION " lacks SINGLE_ISSUER/DEFER_TASKRUN";
#endif
	return NULL;
}

static void params_from(const struct ring_setup *rs, struct io_uring_params *p)
{
	memset(p, 0, sizeof(*p));
	if (rs->cq_size) {
		p->flags |= IORING_SETUP_CQSIZE;
		p->cq_entries = rs->cq_size;
	}
	if (rs->clamp)
		p->flags |= IORING_SETUP_CLAMP;
	if (rs->sqpoll) {
		p->flags |= IORING_SETUP_SQPOLL;
		p->sq_thread_idle = rs->sq_thread_idle >= 0 ? (unsigned)rs->sq_thread_idle : 1000;
		if (rs->sq_aff >= 0) {
			p->flags |= IORING_SETUP_SQ_AFF;
			p->sq_thread_cpu = (unsigned)rs->sq_aff;
		}
	}
	if (rs->attach_wq_fd >= 0) {
		p->flags |= IORING_SETUP_ATTACH_WQ;
		p->wq_fd = (unsigned)rs->attach_wq_fd;
	}
	if (rs->r_disabled || rs->wait_region)
		p->flags |= IORING_SETUP_R_DISABLED;
	if (rs->coop_taskrun)
		p->flags |= IORING_SETUP_COOP_TASKRUN;
	if (rs->taskrun_flag)
		p->flags |= IORING_SETUP_TASKRUN_FLAG;
#ifdef HAVE_DEFER_TASKRUN
	if (rs->single_issuer)
		p->flags |= IORING_SETUP_SINGLE_ISSUER;
	if (rs->defer_taskrun)
		p->flags |= IORING_SETUP_DEFER_TASKRUN;
#endif
}

int ring_setup_init(const struct ring_setup *rs, struct io_uring *ring, unsigned *features, char *why,
		    size_t why_size)
{
	struct io_uring_params p;
	int ret;

	params_from(rs, &p);
	ret = io_uring_queue_init_params(rs->entries, ring, &p);
	if (ret < 0) {
		snprintf(why, why_size, "the kernel refused this ring setup (flags 0x%x): %s", p.flags,
			 strerror(-ret));
		return ret;
	}
	if (rs->wait_region) {
		struct iolab_region_desc desc = { .user_addr = (__u64)(uintptr_t)rs->wait_region,
						  .size = rs->wait_region_size,
						  .flags = IOLAB_MEM_REGION_TYPE_USER };
		struct iolab_mem_region_reg reg = { .region_uptr = (__u64)(uintptr_t)&desc,
						    .flags = IOLAB_MEM_REGION_REG_WAIT_ARG };

		if (syscall(__NR_io_uring_register, ring->ring_fd, IOLAB_REGISTER_MEM_REGION, &reg, 1) < 0) {
			ret = -errno;
			snprintf(why, why_size,
				 "unavailable: this kernel refused a registered wait region (IORING_REGISTER_MEM_REGION, "
				 "Linux 6.13+): %s", strerror(-ret));
			io_uring_queue_exit(ring);
			return ret;
		}
	}
	if (rs->r_disabled || rs->wait_region) {
		/* liburing 2.3 has no io_uring_enable_rings(); the register call is the same. */
		if (syscall(__NR_io_uring_register, ring->ring_fd, IORING_REGISTER_ENABLE_RINGS, NULL, 0) < 0) {
			ret = -errno;
			snprintf(why, why_size, "IORING_REGISTER_ENABLE_RINGS: %s", strerror(-ret));
			io_uring_queue_exit(ring);
			return ret;
		}
	}
	if (rs->register_ring_fd) {
		ret = io_uring_register_ring_fd(ring);
		if (ret < 0) {
			snprintf(why, why_size, "--register-ring-fd: kernel refused: %s", strerror(-ret));
			io_uring_queue_exit(ring);
			return ret;
		}
	}
	*features = p.features;
	return 0;
}
