/* loadgen's pieces shared by its client models: the options, a connection's
 * request bookkeeping and the byte verification. loadgen.c holds the epoll
 * event loop, the thread-per-connection model and main(); loadgen_uring.c
 * the io_uring event loop. */
#ifndef IOLAB_LOADGEN_H
#define IOLAB_LOADGEN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PROG "loadgen"

/* MODEL_AUTO is resolved in main() to the io_uring loop where the kernel has
 * what it needs, else the epoll loop; no thread ever runs it. */
enum client_model { MODEL_EVENT_LOOP, MODEL_URING_LOOP, MODEL_THREAD_PER_CONNECTION, MODEL_AUTO };

struct options {
	const char *host;
	enum client_model model;
	int port, connections, threads, pipeline;
	long long bytes;
	double duration, warmup, rate, timeout;
	const char *histogram;
};

struct lconn {
	int fd, id;
	uint64_t next_seq;       /* sequence number of the next request to send */
	uint64_t done_seq;       /* requests fully echoed */
	long long sent_off;      /* bytes of request next_seq already sent */
	long long recv_off;      /* bytes of request done_seq already received */
	uint64_t *start_ns;      /* ring of send (or scheduled) times, by seq */
	size_t ring;             /* its capacity (power of two) */
	uint64_t next_due_ns;    /* open loop: when the next request is due */
	uint64_t last_progress_ns;
	int want_out;            /* epoll loop: waiting for EPOLLOUT */
	int dead;
	/* io_uring loop: the bytes of the send in flight, and how many of them
	 * the kernel has taken so far. */
	size_t send_len, send_done;
	int send_inflight, recv_armed;
};

struct lthread {
	pthread_t thread;
	int idx, ep, nconn;
	struct lconn *conns;
	/* Latency buckets: each event-loop thread has its own; the threads of
	 * the thread-per-connection model share one (so thousands of threads
	 * do not each carry a histogram), hence atomic. */
	_Atomic uint64_t *hist;
	uint64_t requests, bytes, mismatches, short_closes, timeouts, connect_errors;
	uint64_t first_mismatch_conn, first_mismatch_seq;
	long long first_mismatch_off;
};

extern struct options o;
extern uint64_t t_start_ns, t_measure_ns, t_end_ns;   /* set once all threads connected */

void fail_setup(const char *what);
int connect_one(void);
/* Count this thread as connected, then wait until every thread is and the
 * clock has started (the ramp-up is not measured). */
void ready_then_wait_for_clock(void);

/* Payload bytes [off, off + len) of request seq on connection conn into buf. */
void fill_payload(uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len);

/* Whether connection c may put (more of) a request on the wire now. */
int may_send(const struct lconn *c, uint64_t now);
/* Open loop: the interval between one connection's requests. */
uint64_t due_interval_ns(void);
/* Connect c and make its ring of request start times (before the clock
 * starts); -1, counted as a failed connect, when the server refuses. */
int open_connection(struct lthread *t, struct lconn *c);
/* Close every connection of t and free their rings (after the loop). */
void close_connections(struct lthread *t);
/* Connection i of thread t, once the clock has started. */
void start_connection_clock(const struct lthread *t, struct lconn *c, int i);
/* Before the first byte of request next_seq: note when it started. */
void begin_request(struct lconn *c, uint64_t now);
/* n more bytes of the current request are on their way. */
void advance_sent(struct lconn *c, long long n);
/* n echoed bytes arrived: check each, count and time the requests they end. */
void consume_echo(struct lthread *t, struct lconn *c, const uint8_t *buf, size_t n, uint64_t now);
/* The server ended the stream: an early close unless nothing was pending. */
void end_of_stream(struct lthread *t, struct lconn *c);
/* Connections with requests not yet fully echoed. */
int outstanding(const struct lthread *t);
/* After a wait: fail connections without progress for --timeout. */
void check_timeouts(struct lthread *t, uint64_t now);
/* How long the loop may wait: 100 ms, or until the next open-loop request. */
int wait_ms(const struct lthread *t, uint64_t now);

/* The io_uring loop (loadgen_uring.c). NULL when it can run here, else why
 * not, in one line. */
const char *uring_loop_unavailable(void);
void *run_uring_thread(void *arg);

#endif
