/* One io_uring's setup from the options that choose it. The echo server's
 * ring flags and the cost probe's ring presets both become a ring_setup, so
 * a preset means the same io_uring_params in every program. */
#ifndef IOLAB_RING_SETUP_H
#define IOLAB_RING_SETUP_H

#include <liburing.h>
#include <stddef.h>

struct ring_setup {
	unsigned entries;
	unsigned cq_size;      /* 0: the kernel's default (twice the entries) */
	int clamp;
	int sqpoll;
	int sq_thread_idle;    /* ms before the SQPOLL thread sleeps; < 0: 1000 */
	int sq_aff;            /* CPU of the SQPOLL thread; < 0: unpinned */
	int attach_wq_fd;      /* ring whose io-wq to share; < 0: its own */
	int r_disabled, coop_taskrun, taskrun_flag, single_issuer, defer_taskrun, register_ring_fd;
	/* A registered wait region (page-aligned, a multiple of the page size):
	 * the ring is created disabled, the region registered, then the ring
	 * enabled. NULL: none. */
	void *wait_region;
	size_t wait_region_size;
};

/* A ring_setup with nothing chosen: the default ring of `entries`. */
#define RING_SETUP_DEFAULT(n) { .entries = (n), .sq_thread_idle = -1, .sq_aff = -1, .attach_wq_fd = -1 }

/* Why the kernel (or this liburing) would refuse the combination, in the
 * server's flag names, or NULL when it can be tried. */
const char *ring_setup_conflict(const struct ring_setup *rs);

/* Create `ring` as `rs` says: io_uring_queue_init_params, then enable a
 * disabled ring and register the ring fd when asked. Returns 0, with the
 * kernel's feature bits in *features; or -errno, with `why` saying which
 * step was refused and the ring not left open. */
int ring_setup_init(const struct ring_setup *rs, struct io_uring *ring, unsigned *features, char *why,
		    size_t why_size);

#endif
