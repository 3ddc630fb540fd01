/* echo-uring's parts: the state they share, passed explicitly (each ring's
 * uring_ctx, and through it the one uring_server), and what each part
 * offers the others. uring_options.c declares and parses the flags;
 * echo_uring.c owns the server and sets up the rings; uring_loop.c submits
 * and dispatches completions; uring_conn.c runs each connection (accept,
 * receive, queue, close), uring_send.c its sends; uring_buffers.c owns the
 * provided buffers and the connections starved of them. */
#ifndef IOLAB_ECHO_URING_H
#define IOLAB_ECHO_URING_H

#include <liburing.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../common/ring_setup.h"
#include "server.h"

#define PROG "echo-uring"
#define MAX_QUEUED_CHUNKS 8   /* per connection, before backpressure */
#define STOP_CHECK_MS 100     /* how often ring 0 looks for SIGTERM/SIGINT */
/* --send-bundle: entries of a connection's send buffer ring (one page);
 * queued chunks past them join as the kernel uses the first up. */
#define SEND_RING_ENTRIES 256

enum op {
	OP_ACCEPT = 1, OP_RECV, OP_SEND, OP_TIMEOUT, OP_PROVIDE, OP_HANDOFF, OP_CANCEL, OP_MSG, OP_STOP,
	OP_POLL, OP_POLLOUT, OP_RESUME,
};

struct options {
	const char *bind;
	int port;
	struct ring_setup ring;   /* the ring flags; attach_wq_fd is set per ring */
	int attach_wq;
	int async, buf_select, buf_ring, fixed_files, link_timeout_ms, hardlink, drain;
	int multishot_accept, multishot_recv, send_zc;
	int poll_first;         /* --poll-first: see uring_conn.c */
	int rings, granule;
	const char *iowq_aff;   /* --iowq-aff as given, "" without it */
	unsigned buf_size, buf_count;
	unsigned hold_pct;   /* --hold-share: percent of a ring's pool its connections may keep queued */
	unsigned wait_nr;       /* --wait-nr: completions each wait asks for */
	unsigned min_wait_us;   /* --min-wait: return after this with what arrived; 0: off */
	int recv_bundle;        /* --recv-bundle: IORING_RECVSEND_BUNDLE on receives */
	int buf_inc;            /* --buf-inc: an incremental buffer ring (IOU_PBUF_RING_INC) */
	int gather_send;        /* --gather-send: one SENDMSG for every queued chunk */
	int send_bundle;        /* --send-bundle: a send buffer ring per connection, sent in bundles */
	unsigned napi_us;       /* --napi: NAPI busy polling for up to this per wait; 0: off */
	int zc_fixed;           /* --zc-fixed: zero-copy sends from the provided buffers, registered */
	int reg_wait;           /* --reg-wait: waits read their argument from a registered region */
	/* --iowq-aff: the CPUs io-wq workers may run on (NULL: as the kernel
	 * decides, which is the server's own affinity). */
	cpu_set_t *iowq_set;
	size_t iowq_setsize;
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
	/* recv_armed: the receive (with --poll-first, the multishot poll) is armed */
	int open, closing, recv_armed, recv_cancelling, send_inflight, zc_wait, send_failed;
	/* --poll-first: a RECV is in flight; the poll saw data while the buffer
	 * was busy; the poll saw the peer's end (read after the data before it) */
	int recv_inflight, readable, hup;
	uint32_t gen;
	int ring;            /* owning ring */
	char *buf;           /* own receive buffer (no provided buffers) */
	struct chunk *head, *tail;
	unsigned queued;
	unsigned held;       /* queued chunks in this ring's provided buffers (fair_share bounds it) */
	/* The send in flight: how many queued chunks and bytes it carries. */
	unsigned send_pieces, send_len;
	struct send_gather *gather;   /* --gather-send: its message, kept until it completes */
	/* --send-bundle: the connection's send buffer ring (buffer group
	 * send_bgid; 0: none, plain sends), the entries in it the kernel has
	 * not used up, and the first queued chunk not yet in it. */
	struct io_uring_buf_ring *send_br;
	unsigned short send_bgid;
	unsigned send_ring_n;
	struct chunk *ring_next;
};

/* --gather-send: a SENDMSG's header and iovec, one entry per chunk; grown
 * (only between sends) to the longest queue seen, up to IOV_MAX. */
struct send_gather {
	struct msghdr msg;
	unsigned cap;
	struct iovec iov[];
};

/* What the rings share: one, owned by main (echo_uring.c), which each ring
 * reaches through its `s`. Nothing else is global. */
struct uring_server {
	struct options opts;      /* options_parse, then the port picked, before any ring runs */
	struct uring_ctx *rings;
	size_t nconns;            /* every connection table's size */
	int stop_fd;              /* signalfd for SIGTERM/SIGINT, read by ring 0 */
	atomic_int stopping;      /* set by ring 0 once a stop signal arrived */
	struct __kernel_timespec link_ts;   /* every linked receive's timeout */
};

struct uring_ctx {
	struct uring_server *s;
	const struct options *o;  /* &s->opts */
	int idx;
	struct iolab_reg_wait *wait_region;   /* --reg-wait: this ring's region, one entry used */
	struct uconn *conns; /* this ring's connections, fd-indexed, sized from RLIMIT_NOFILE */
	int *starved;        /* connections whose receive found no buffer */
	size_t nstarved;
	pthread_t thread;
	struct io_uring ring;
	int listen_fd;       /* -1 when ring 0 routes connections here */
	struct io_uring_buf_ring *br;
	char *bufs;
	unsigned bufs_held;  /* provided buffers this program holds (CQE seen, not returned) */
	unsigned open_conns; /* connections open on this ring */
	/* --recv-bundle: a bundle's buffers follow each other in ring order,
	 * not in id order: slot_bid[p % count] is the buffer added at ring
	 * position p, pos_of_bid[bid] the position a buffer was last added at. */
	unsigned short *slot_bid;
	uint64_t *pos_of_bid;
	uint64_t ring_tail;  /* buffers added to the ring so far */
	int *bundle_bids;    /* scratch: the ids of one bundle's buffers */
	/* --buf-inc: how much of each buffer completions have used, how many
	 * queued chunks still point into it, and whether the kernel is done
	 * with it (a completion without IORING_CQE_F_BUF_MORE). A buffer goes
	 * back to the ring once it is retired and no chunk points into it. */
	unsigned *inc_used;
	unsigned *inc_refs;
	unsigned char *inc_retired;
	struct echo_counters c;
	struct accept_pause pause;
	int accept_paused;   /* the descriptor table was full: accepting resumes after a timeout */
};


/* --- user_data: op (8 bits) | generation (24 bits) | fd (32 bits) ----------- */

static inline __u64 ud(enum op op, uint32_t gen, int fd)
{
	return ((__u64)op << 56) | ((__u64)(gen & 0xffffff) << 32) | (uint32_t)fd;
}

static inline enum op ud_op(__u64 u) { return (enum op)(u >> 56); }

static inline uint32_t ud_gen(__u64 u) { return (uint32_t)(u >> 32) & 0xffffff; }

static inline int ud_fd(__u64 u) { return (int)(uint32_t)u; }

/* uring_options.c: the flags, each declared once */
void options_parse(struct options *o, int argc, char **argv);   /* exits on --help or a bad flag */
char *options_json(const struct options *o, int iowq_workers);   /* malloc'd */
void refuse(const char *why);   /* one line, exit 2 */

/* uring_loop.c: submission and the completion loop */
void data_flags(struct uring_ctx *r, struct io_uring_sqe *sqe);
void die(const char *what, int err);
void make_room(struct uring_ctx *r, unsigned n);
void *run_ring(void *arg);
struct io_uring_sqe *sqe_get(struct uring_ctx *r);

/* uring_conn.c: connections */
void arm_accept(struct uring_ctx *r);
void arm_recv(struct uring_ctx *r, int fd);
void recv_now(struct uring_ctx *r, int fd);
void cancel_recv(struct uring_ctx *r, int fd);
int receiving(const struct uconn *c);
void conn_open(struct uring_ctx *r, int fd);
void on_recv(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale);
void on_poll(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale);
void route_or_open(struct uring_ctx *r, int fd);
void chunk_free(struct uring_ctx *r, struct uconn *c, struct chunk *ch);
void drop_queue(struct uring_ctx *r, struct uconn *c);
void close_when_idle(struct uring_ctx *r, int fd);
void conn_close(struct uring_ctx *r, int fd);

/* uring_send.c: a connection's sends */
void send_ring_open(struct uring_ctx *r, int fd);
void queue_chunk(struct uring_ctx *r, int fd, char *data, unsigned len, int bid);
void on_send(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale);
void on_pollout(struct uring_ctx *r, struct io_uring_cqe *cqe, int fd, int stale);
void end_failed_send(struct uring_ctx *r, int fd);

/* uring_buffers.c: provided buffers */
char *buf_addr(struct uring_ctx *r, int bid);
void buf_return(struct uring_ctx *r, int bid);
void buf_release(struct uring_ctx *r, int bid);
unsigned bufs_hist_bin(unsigned n);
unsigned recv_buffers(struct uring_ctx *r, struct io_uring_cqe *cqe, int *bids, unsigned max, char **data);
void setup_buffers(struct uring_ctx *r);
int register_buf_ring(struct uring_ctx *r, struct io_uring_buf_ring *br, unsigned entries, unsigned short bgid,
		      int incremental);
void unstarve(struct uring_ctx *r, int fd);

#endif
