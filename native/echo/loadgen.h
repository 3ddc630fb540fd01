/* loadgen's pieces shared by its client models (loadgen_core.c): the
 * options, the start line, a connection's request bookkeeping, the byte
 * verification and the latency histogram. The models: loadgen_epoll.c (the
 * epoll event loop), loadgen_uring.c (the same loop on io_uring) and
 * loadgen_blocking.c (a thread per connection); loadgen.c the command line
 * and the report. */
#ifndef IOLAB_LOADGEN_H
#define IOLAB_LOADGEN_H

#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define PROG "loadgen"

/* Log-linear latency histogram: 64 sub-buckets per power of two of
 * nanoseconds, so relative resolution is better than 2 % and absolute
 * better than 1 µs below 64 µs. */
#define SUB_BITS 6
#define SUB (1u << SUB_BITS)
#define MAX_EXP 42
#define NBUCKETS ((MAX_EXP + 1) * SUB)

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
	int ramp_up;             /* each connection echoes request 0 before the clock */
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
	/* When the first byte went out (0: not yet), and whether the server
	 * echoed one before the run's end. */
	uint64_t first_sent_ns;
	int answered;
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
	uint64_t unanswered_at_start;   /* connections not answered in the ramp-up */
};

extern struct options o;
extern struct sockaddr_in server_addr;                 /* the server, from --host and --port */
extern uint64_t t_start_ns, t_measure_ns, t_end_ns;   /* set once all threads connected */

void fail_setup(const char *what);
int connect_one(void);
/* Count this thread as connected, then wait until every thread is and the
 * clock has started (the ramp-up is not measured). */
void ready_then_wait_for_clock(void);
/* main: once every thread is ready, start the clock and release them. */
void start_clock_when_all_ready(void);

/* Payload bytes [off, off + len) of request seq on connection conn into buf. */
void fill_payload(uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len);
/* How many of buf[0, len) differ from payload bytes [off, off + len) of
 * request seq; *first gets the offset of the first that does. */
uint64_t count_mismatches(const uint8_t *buf, uint32_t conn, uint64_t seq, uint64_t off, size_t len,
			  long long *first);
/* Count bad mismatched bytes of request seq, remembering where the run's
 * first one was (first: its offset in the request). */
void note_mismatches(struct lthread *t, struct lconn *c, uint64_t seq, uint64_t bad, long long first);

/* One latency into t's histogram; a bucket's [low, high) in ns; the q
 * quantile of total requests in hist, in µs (NaN when there are none). */
void record_latency(struct lthread *t, uint64_t ns);
void bucket_range(unsigned b, uint64_t *low, uint64_t *high);
double percentile(const uint64_t *hist, uint64_t total, double q);

/* Whether connection c may put (more of) a request on the wire now. */
int may_send(const struct lconn *c, uint64_t now);
/* Open loop: the interval between one connection's requests. */
uint64_t due_interval_ns(void);
/* Connect c and make its ring of request start times (before the clock
 * starts); -1, counted as a failed connect, when the server refuses. */
int open_connection(struct lthread *t, struct lconn *c);
/* The ramp-up (--ramp-up, the default): every open connection of t sends
 * request 0 and reads its echo, all at once, before the clock starts, so a
 * server that takes on connections slowly (a thread per connection, made on
 * demand) holds all it was asked for when the clock starts. Each must be
 * answered within --timeout; one that is not counts in unanswered_at_start
 * and is dead. The measured requests then start at 1. */
void ramp_up(struct lthread *t);
/* After a blocking connection's own request 0 (loadgen_blocking.c sends
 * it): count it if it failed, and let the run judge c afresh. */
void ramp_up_done(struct lthread *t, struct lconn *c);
/* Close every connection of t and free their rings (after the loop). */
void close_connections(struct lthread *t);
/* Connection i of thread t, once the clock has started. */
void start_connection_clock(const struct lthread *t, struct lconn *c, int i);
/* Before the first byte of request next_seq: note when it started. */
void begin_request(struct lconn *c, uint64_t now);
/* n more bytes of the current request are on their way. */
void advance_sent(struct lconn *c, long long n);
/* Bytes went out on c; bytes came back from the server at now. */
void note_sent(struct lconn *c);
void note_answered(struct lconn *c, uint64_t now);
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

/* The client models, each a thread's body (arg: its struct lthread). */
void *run_epoll_thread(void *arg);          /* loadgen_epoll.c */
void *run_blocking_connection(void *arg);   /* loadgen_blocking.c: one connection */
void *run_uring_thread(void *arg);          /* loadgen_uring.c */
/* NULL when the io_uring loop can run here, else why not, in one line. */
const char *uring_loop_unavailable(void);

#endif
