/* io_uring ABI constants newer than the installed liburing's headers.
 *
 * Debian 12 ships liburing 2.3, whose io_uring.h predates some kernel ABI
 * that a 6.x kernel accepts. Each value below is the kernel's UAPI value
 * (include/uapi/linux/io_uring.h) and is defined only where the installed
 * header lacks it, so a newer liburing's definitions win. Whether the
 * running kernel accepts a feature is probed at run time, never assumed
 * from these definitions. tests/test_native.py checks the values against
 * the kernel's UAPI header when one is installed.
 */
#ifndef IOLAB_URING_COMPAT_H
#define IOLAB_URING_COMPAT_H

#include <liburing.h>
#include <stddef.h>
#include <string.h>

/* SEND_ZC: report in the notification whether the kernel had to copy
 * (Linux 6.2). Set in sqe->ioprio; the notification's res then carries
 * IORING_NOTIF_USAGE_ZC_COPIED if any byte was copied. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

/* Batched waits (Linux 6.12): IORING_ENTER_EXT_ARG's getevents argument
 * carries min_wait_usec, a time after which a wait for wait_nr completions
 * returns with the ones that have arrived (at least one). A header that
 * defines IORING_FEAT_MIN_TIMEOUT names the field; 2.3's calls it pad. */
#ifdef IORING_FEAT_MIN_TIMEOUT
#define IOLAB_GETEVENTS_MIN_WAIT(arg) ((arg).min_wait_usec)
#else
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#define IOLAB_GETEVENTS_MIN_WAIT(arg) ((arg).pad)
#endif

/* Bundles (Linux 6.10): a receive (or send) with IORING_RECVSEND_BUNDLE in
 * sqe->ioprio takes as many provided buffers as the data fills, contiguous
 * in ring order; the CQE names the first. The ring reports support with
 * IORING_FEAT_RECVSEND_BUNDLE. */
#ifndef IORING_RECVSEND_BUNDLE
#define IORING_RECVSEND_BUNDLE (1U << 4)
#endif
#ifndef IORING_FEAT_RECVSEND_BUNDLE
#define IORING_FEAT_RECVSEND_BUNDLE (1U << 14)
#endif

/* Incremental buffer rings (Linux 6.12): a buffer ring registered with
 * IOU_PBUF_RING_INC is consumed a completion's bytes at a time; a CQE with
 * IORING_CQE_F_BUF_MORE leaves its buffer at the ring's head for the next.
 * IOU_PBUF_RING_INC is an enum value in newer headers, so it cannot be
 * tested with #ifdef: the flag goes under a name of our own. The flags are
 * the u16 after bgid in struct io_uring_buf_reg, named pad in liburing 2.3
 * and flags later; IOLAB_SET_BUF_REG_FLAGS writes it whatever its name. */
#define IOLAB_PBUF_RING_INC 2U
#ifndef IORING_CQE_F_BUF_MORE
#define IORING_CQE_F_BUF_MORE (1U << 4)
#endif
#define IOLAB_SET_BUF_REG_FLAGS(reg, value) \
	do { \
		__u16 iolab_flags_ = (__u16)(value); \
		memcpy((char *)&(reg) + offsetof(struct io_uring_buf_reg, bgid) + sizeof(__u16), &iolab_flags_, \
		       sizeof(iolab_flags_)); \
	} while (0)

/* NAPI busy polling (Linux 6.9): IORING_REGISTER_NAPI with this struct has
 * a ring's waits busy-poll the NAPI instances its sockets' packets came
 * through, for up to busy_poll_to µs. The opcode is an enum value in newer
 * headers and 2.3 lacks the struct: both go under names of our own. opcode
 * and op_param 0 register with dynamic tracking (6.13+; padding before). A
 * socket's NAPI id (SO_INCOMING_NAPI_ID) is 0 on loopback and veth: there
 * is no NAPI instance to poll, and the registration is inert. */
#define IOLAB_REGISTER_NAPI 27U
struct iolab_uring_napi {
	__u32 busy_poll_to;
	__u8 prefer_busy_poll;
	__u8 opcode;
	__u8 pad[2];
	__u32 op_param;
	__u32 resv;
};
#ifndef SO_INCOMING_NAPI_ID
#define SO_INCOMING_NAPI_ID 56
#endif

/* The epoll-wait bridge (Linux 6.15): IORING_OP_EPOLL_WAIT reaps an epoll
 * set's ready events (sqe->fd the epoll fd, addr the events array, len
 * its size) as a completion whose result is their count; with none ready
 * it waits, armed as a poll on the epoll fd. An enum value in newer
 * liburing headers, absent from 2.3: a name of our own. */
#define IOLAB_OP_EPOLL_WAIT 59U

/* Registered wait regions (Linux 6.13): memory registered with
 * IORING_REGISTER_MEM_REGION (flag REG_WAIT_ARG) while the ring is still
 * disabled holds struct io_uring_reg_wait entries; a wait then passes
 * IORING_ENTER_EXT_ARG_REG and an entry's byte offset in place of a
 * getevents argument the kernel would copy in on every wait. None of it is
 * in liburing 2.3's headers, and the opcode is an enum value in newer ones:
 * all under names of our own. */
#define IOLAB_REGISTER_MEM_REGION 34U
#define IOLAB_MEM_REGION_TYPE_USER 1U
#define IOLAB_MEM_REGION_REG_WAIT_ARG 1U
#define IOLAB_ENTER_EXT_ARG_REG (1U << 6)
#define IOLAB_REG_WAIT_TS (1U << 0)
struct iolab_region_desc {
	__u64 user_addr;
	__u64 size;
	__u32 flags;
	__u32 id;
	__u64 mmap_offset;
	__u64 resv[4];
};
struct iolab_mem_region_reg {
	__u64 region_uptr;
	__u64 flags;
	__u64 resv[2];
};
struct iolab_reg_wait {
	struct __kernel_timespec ts;
	__u32 min_wait_usec;
	__u32 flags;
	__u64 sigmask;
	__u32 sigmask_sz;
	__u32 pad[3];
	__u64 pad2[2];
};

#endif
