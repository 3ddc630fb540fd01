/* Connected stream socket pairs over TCP loopback or AF_UNIX, for probes. */
#ifndef IOLAB_SOCKPAIR_H
#define IOLAB_SOCKPAIR_H

#include <stddef.h>

enum transport { TRANSPORT_TCP, TRANSPORT_UNIX, TRANSPORT_COUNT };
extern const char *const transport_names[TRANSPORT_COUNT];

struct conn {
	int a; /* the side the probe measures */
	int b; /* the peer that feeds or drains it */
};

/* Make `n` connected pairs. TCP pairs use 127.0.0.1 with TCP_NODELAY on both
 * ends. Raises RLIMIT_NOFILE's soft limit if needed. Exits with a one-line
 * reason on failure. */
struct conn *make_conns(const char *prog, enum transport t, size_t n);
void close_conns(struct conn *c, size_t n);

/* Write exactly len bytes (blocking); exits on error. */
void write_all(const char *prog, int fd, const void *buf, size_t len);
/* Read and discard exactly len bytes (blocking); exits on error or EOF. */
void drain_exact(const char *prog, int fd, size_t len);
/* One request/response per connection: the peer sends `bytes`, the measured
 * side reads them and answers, the peer reads the answer. Repeated `rounds`
 * times, it uses up a new TCP connection's quick-ACK credit and leaves both
 * ends in delayed-ACK ping-pong mode, the state of an echo connection. */
void echo_rounds(const char *prog, struct conn *c, size_t n, int rounds, char *buf, size_t bytes);

/* TCP_QUICKACK on `fd`: ACK every segment at once until the kernel leaves
 * quick-ACK mode again; exits on error. */
void set_quickack(const char *prog, int fd);

/* Spin until `fd` has at least `bytes` queued for reading (SIOCINQ). */
void wait_queued(const char *prog, int fd, size_t bytes);

#endif
