#define _GNU_SOURCE
#include "sockpair.h"

#include <arpa/inet.h>
#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

const char *const transport_names[TRANSPORT_COUNT] = { "tcp", "unix" };

static void die(const char *prog, const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", prog, what, strerror(errno));
	exit(1);
}

static void ensure_fds(const char *prog, size_t needed)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		die(prog, "getrlimit(RLIMIT_NOFILE)");
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur >= needed)
		return;
	if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < needed) {
		fprintf(stderr, "%s: need %zu file descriptors but RLIMIT_NOFILE's hard limit is %llu; raise it (ulimit -Hn)\n",
			prog, needed, (unsigned long long)rl.rlim_max);
		exit(1);
	}
	rl.rlim_cur = needed;
	if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
		die(prog, "setrlimit(RLIMIT_NOFILE)");
}

static void set_int(const char *prog, int fd, int level, int opt, int val, const char *name)
{
	if (setsockopt(fd, level, opt, &val, sizeof(val)) != 0)
		die(prog, name);
}

/* Large buffers so a batch of queued messages never blocks a send. Root may
 * exceed rmem_max with the FORCE variants; others get what the kernel allows. */
static void big_buffers(int fd)
{
	int sz = 4 << 20;

	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &sz, sizeof(sz)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof(sz)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
}

struct conn *make_conns(const char *prog, enum transport t, size_t n)
{
	struct conn *c = calloc(n, sizeof(*c));
	int lfd = -1;
	struct sockaddr_in addr;
	socklen_t alen = sizeof(addr);

	if (!c)
		die(prog, "calloc");
	ensure_fds(prog, 2 * n + 64);
	if (t == TRANSPORT_TCP) {
		lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (lfd < 0)
			die(prog, "socket(AF_INET)");
		memset(&addr, 0, sizeof(addr));
		addr.sin_family = AF_INET;
		addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
			die(prog, "bind(127.0.0.1:0)");
		if (listen(lfd, 4096) != 0)
			die(prog, "listen");
		if (getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
			die(prog, "getsockname");
	}
	for (size_t i = 0; i < n; i++) {
		if (t == TRANSPORT_UNIX) {
			int sv[2];

			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
				die(prog, "socketpair(AF_UNIX)");
			c[i].a = sv[0];
			c[i].b = sv[1];
		} else {
			int cfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

			if (cfd < 0)
				die(prog, "socket(AF_INET)");
			if (connect(cfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
				die(prog, "connect(127.0.0.1)");
			c[i].b = cfd;
			c[i].a = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (c[i].a < 0)
				die(prog, "accept");
			set_int(prog, c[i].a, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
			set_int(prog, c[i].b, IPPROTO_TCP, TCP_NODELAY, 1, "setsockopt(TCP_NODELAY)");
		}
		big_buffers(c[i].a);
		big_buffers(c[i].b);
	}
	if (lfd >= 0 && close(lfd) != 0)
		die(prog, "close(listener)");
	return c;
}

void close_conns(struct conn *c, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		close(c[i].a);
		close(c[i].b);
	}
	free(c);
}

void write_all(const char *prog, int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			die(prog, "send");
		}
		p += w;
		len -= (size_t)w;
	}
}

void drain_exact(const char *prog, int fd, size_t len)
{
	char buf[65536];

	while (len) {
		ssize_t r = recv(fd, buf, len < sizeof(buf) ? len : sizeof(buf), 0);

		if (r < 0) {
			if (errno == EINTR)
				continue;
			die(prog, "recv");
		}
		if (r == 0) {
			fprintf(stderr, "%s: peer closed with %zu bytes outstanding\n", prog, len);
			exit(1);
		}
		len -= (size_t)r;
	}
}

void echo_rounds(const char *prog, struct conn *c, size_t n, int rounds, char *buf, size_t bytes)
{
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < n; i++) {
			write_all(prog, c[i].b, buf, bytes);
			drain_exact(prog, c[i].a, bytes);
			write_all(prog, c[i].a, buf, bytes);
			drain_exact(prog, c[i].b, bytes);
		}
	}
}

void set_quickack(const char *prog, int fd)
{
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one)) != 0) {
		fprintf(stderr, "%s: setsockopt(TCP_QUICKACK): %s\n", prog, strerror(errno));
		exit(1);
	}
}

void wait_queued(const char *prog, int fd, size_t bytes)
{
	struct timespec start, now;

	if (clock_gettime(CLOCK_MONOTONIC, &start) != 0)
		die(prog, "clock_gettime");
	for (;;) {
		int q = 0;

		if (ioctl(fd, SIOCINQ, &q) != 0)
			die(prog, "ioctl(SIOCINQ)");
		if ((size_t)q >= bytes)
			return;
		if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
			die(prog, "clock_gettime");
		if (now.tv_sec - start.tv_sec > 10) {
			fprintf(stderr, "%s: data did not arrive within 10 s (%d of %zu bytes queued)\n",
				prog, q, bytes);
			exit(1);
		}
		sched_yield();
	}
}
