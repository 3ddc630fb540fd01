/* Pieces shared by the echo servers: listening sockets, stop signals,
 * counters and the final JSON line. */
#ifndef IOLAB_ECHO_SERVER_H
#define IOLAB_ECHO_SERVER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Set by SIGTERM/SIGINT; loops check it after every wait. */
extern volatile sig_atomic_t echo_stop;

#define BUFS_HIST_BINS 8   /* bins of the buffers-per-receive and per-send histograms */

struct echo_counters {
	uint64_t requests;     /* receive completions that carried data */
	uint64_t bytes;        /* bytes echoed back */
	uint64_t accepted;     /* connections accepted */
	uint64_t closed;       /* connections closed */
	uint64_t waits;        /* epoll_wait calls / io_uring_submit_and_wait calls */
	uint64_t enters;       /* io_uring_enter system calls (io_uring only) */
	uint64_t submits;      /* io_uring_submit calls to make room in the SQ (io_uring only) */
	uint64_t events;       /* events returned by epoll_wait / CQEs reaped */
	uint64_t sqes;         /* SQEs submitted (io_uring) */
	uint64_t short_writes; /* sends that wrote less than asked */
	uint64_t async_sqes;   /* SQEs flagged IOSQE_ASYNC (pushed to io-wq) */
	uint64_t timeouts;     /* link timeouts that fired */
	uint64_t nobufs;       /* receives that found no provided buffer */
	uint64_t zc_notifs;    /* zero-copy send notifications */
	uint64_t would_block;  /* receives and sends that found nothing to do (EAGAIN; --poll-first) */
	/* Provided buffers (io_uring): what each feature did, so that a
	 * configuration whose feature stayed inert is told apart. */
	uint64_t recv_buffers;   /* buffers consumed by receives that carried data */
	uint64_t recv_bufs_hist[BUFS_HIST_BINS]; /* receives by buffers taken: 1, 2, 3-4, 5-8, ..., >64 */
	uint64_t buf_more;       /* completions that left their buffer for more (IORING_CQE_F_BUF_MORE) */
	uint64_t bufs_retired;   /* incremental buffers used up and given back */
	uint64_t rearms;         /* multishot receives re-armed after they ended without an error */
	uint64_t send_buffers;   /* chunks (buffers or pieces) carried by sends that sent data */
	uint64_t send_bufs_hist[BUFS_HIST_BINS]; /* such sends by chunks carried: 1, 2, 3-4, ..., >64 */
	/* NAPI busy polling (echo-uring --napi): connections whose socket's NAPI
	 * id was read at close, and those of them with one (0 on loopback: the
	 * busy polling had nothing to poll). */
	uint64_t napi_checked, napi_conns;
	/* Zero-copy sends (echo-uring --send-zc): notifications whose usage
	 * report says the kernel copied the bytes after all, and sends from the
	 * registered provided-buffer area (--zc-fixed). */
	uint64_t zc_copied, zc_fixed;
	/* An epoll server that waits through io_uring (echo-epoll
	 * --uring-wait): the completions of its IORING_OP_EPOLL_WAITs (events
	 * counts the epoll events they carried). */
	uint64_t wait_cqes;
};

void counters_add(struct echo_counters *into, const struct echo_counters *c);

/* Install SIGTERM/SIGINT handlers (no SA_RESTART, so blocking waits return
 * EINTR) and SIGUSR1 (used to wake worker threads); ignore SIGPIPE. */
void install_stop_handlers(void);

/* Raise RLIMIT_NOFILE's soft limit to the hard limit; returns the new soft
 * limit, the size of fd-indexed tables. */
size_t raise_nofile(const char *prog);

/* A non-blocking listening TCP socket on bind:port (SO_REUSEADDR; with
 * reuseport, SO_REUSEPORT). Exits with a one-line reason on failure. */
int listen_tcp(const char *prog, const char *bind_addr, int port, int reuseport, int nonblock);

/* An accept that fails for want of descriptors or memory (EMFILE, ENFILE,
 * ENOBUFS, ENOMEM) leaves the connection queued, so accepting again at once
 * fails again: a server would spin. Servers pause accepting for
 * ACCEPT_PAUSE_MS instead, keep serving what is open, and say so at most
 * once per second, with a count. */
#define ACCEPT_PAUSE_MS 10

struct accept_pause {
	uint64_t last_report_ns;
	uint64_t unreported;
};

/* Whether ``err`` (an errno) is one accept_paused handles. */
int accept_should_pause(int err);

/* Count one refused accept; print one line per second at most. */
void accept_paused(const char *prog, struct accept_pause *p, int err);

/* TCP_NODELAY on an accepted socket; returns 0 or -1 with errno. */
int set_nodelay(int fd);

/* Print the final JSON line: counters, CPU time, and the configuration
 * (a JSON object text). */
void print_final(FILE *out, const char *server, const struct echo_counters *c,
		 const char *config_json);

#endif
