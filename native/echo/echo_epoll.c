/*
 * echo-epoll: a TCP echo server on level-triggered epoll.
 *
 * Non-blocking sockets with TCP_NODELAY. Data read is written back at once;
 * whatever a short write leaves is kept per connection, reading from that
 * connection stops (backpressure) and EPOLLOUT drains the rest before
 * reading resumes, so no byte is dropped or reordered and a slow reader
 * stalls only itself. --threads N runs N event loops, each with its own
 * SO_REUSEPORT listener. SIGTERM/SIGINT: exit 0 with one JSON line of counters.
 *
 * --uring-wait is the epoll-wait bridge (Linux 6.15): the same server, whose
 * wait is an IORING_OP_EPOLL_WAIT on a small ring instead of epoll_wait, as
 * an epoll program moving to io_uring a piece at a time would first do. It
 * lives here, not in echo-uring, because everything but the wait is this
 * server's: readiness from the epoll set, reads and writes by system call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/uring_compat.h"
#include "../common/timing.h"
#include "server.h"

#define PROG "echo-epoll"
#define SCRATCH (64 * 1024)

struct conn {
	char *pending;      /* bytes a short write left, not yet sent */
	size_t pending_len, pending_off;
	int open;
};

struct worker {
	pthread_t thread;
	int listen_fd, ep;
	int max_events;
	struct echo_counters c;
	struct accept_pause pause;
	uint64_t accept_resume_ns;   /* accepting is paused until then (0: not paused) */
	int uring_wait;              /* wait through ring (--uring-wait) */
	int wait_armed;              /* an EPOLL_WAIT is in the ring, not completed */
	struct io_uring ring;
};

struct options {
	const char *bind;
	int port, threads, max_events;
	int uring_wait;
};

static struct conn *conns;   /* fd-indexed, sized from RLIMIT_NOFILE */
static size_t nconns;

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [OPTIONS]\n"
		"\n"
		"TCP echo server on level-triggered epoll. Prints one JSON line of counters\n"
		"and exits 0 on SIGTERM or SIGINT.\n"
		"\n"
		"  --port P         TCP port to listen on (required; 0 picks a free one,\n"
		"                   reported on stderr as 'listening on ADDR:PORT')\n"
		"  --bind ADDR      IPv4 address to bind (default 127.0.0.1)\n"
		"  --threads N      event loops, each with an SO_REUSEPORT listener (default 1)\n"
		"  --max-events N   epoll_wait batch size (default 256)\n"
		"  --uring-wait     wait with IORING_OP_EPOLL_WAIT on an io_uring (the\n"
		"                   epoll-wait bridge, Linux 6.15+) instead of epoll_wait;\n"
		"                   a kernel without it: exit 2 with the reason\n"
		"  -h, --help       show this help\n");
}

static void conn_close(struct worker *w, int fd)
{
	struct conn *c = &conns[fd];

	free(c->pending);
	memset(c, 0, sizeof(*c));
	close(fd);   /* also removes it from the epoll set */
	w->c.closed++;
}

static int ep_mod(struct worker *w, int fd, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.fd = fd };

	return epoll_ctl(w->ep, EPOLL_CTL_MOD, fd, &ev);
}

/* Write what we can; keep the rest and switch the connection to EPOLLOUT. */
static int send_or_queue(struct worker *w, int fd, const char *buf, size_t len)
{
	struct conn *c = &conns[fd];
	size_t off = 0;

	while (off < len) {
		ssize_t n = send(fd, buf + off, len - off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -1;
		}
		w->c.bytes += (uint64_t)n;
		off += (size_t)n;
		if (off < len)
			w->c.short_writes++;
	}
	if (off == len)
		return 0;
	c->pending = malloc(len - off);
	if (!c->pending)
		return -1;
	memcpy(c->pending, buf + off, len - off);
	c->pending_len = len - off;
	c->pending_off = 0;
	return ep_mod(w, fd, EPOLLOUT);
}

static void on_readable(struct worker *w, int fd, char *scratch)
{
	for (;;) {
		ssize_t n = recv(fd, scratch, SCRATCH, 0);

		if (n > 0) {
			w->c.requests++;
			if (send_or_queue(w, fd, scratch, (size_t)n) != 0) {
				conn_close(w, fd);
				return;
			}
			if (conns[fd].pending)   /* backpressure: stop reading */
				return;
			if ((size_t)n < SCRATCH)
				return;             /* level-triggered: more will be reported */
			continue;
		}
		if (n == 0) {               /* peer closed or half-closed: all echoed */
			conn_close(w, fd);
			return;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			conn_close(w, fd);
		return;
	}
}

static void on_writable(struct worker *w, int fd)
{
	struct conn *c = &conns[fd];

	while (c->pending_off < c->pending_len) {
		ssize_t n = send(fd, c->pending + c->pending_off, c->pending_len - c->pending_off,
				 MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return;
			conn_close(w, fd);
			return;
		}
		w->c.bytes += (uint64_t)n;
		c->pending_off += (size_t)n;
	}
	free(c->pending);
	c->pending = NULL;
	c->pending_len = c->pending_off = 0;
	if (ep_mod(w, fd, EPOLLIN) != 0)
		conn_close(w, fd);
}

static void on_accept(struct worker *w)
{
	for (;;) {
		int fd = accept4(w->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN };

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (accept_should_pause(errno)) {
				/* The listener stays readable: stop watching it for a while. */
				struct epoll_event off = { .events = 0, .data.fd = w->listen_fd };

				accept_paused(PROG, &w->pause, errno);
				if (epoll_ctl(w->ep, EPOLL_CTL_MOD, w->listen_fd, &off) != 0) {
					fprintf(stderr, PROG ": epoll_ctl: %s\n", strerror(errno));
					exit(1);
				}
				w->accept_resume_ns = now_ns() + ACCEPT_PAUSE_MS * 1000000ull;
				return;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				fprintf(stderr, PROG ": accept: %s\n", strerror(errno));
			return;
		}
		if ((size_t)fd >= nconns || set_nodelay(fd) != 0) {
			close(fd);
			continue;
		}
		ev.data.fd = fd;
		if (epoll_ctl(w->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
			close(fd);
			continue;
		}
		conns[fd].open = 1;
		w->c.accepted++;
	}
}

/* The bridge's wait (--uring-wait): the ring's one EPOLL_WAIT stays armed
 * across waits that time out or are interrupted, and its completion
 * carries the events. Returns their count (0 on a timeout), or -1 with
 * errno as epoll_wait would. */
static int uring_epoll_wait(struct worker *w, struct epoll_event *events, int timeout_ms)
{
	struct io_uring_cqe *cqe;
	int ret;

	if (!w->wait_armed) {
		struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);

		if (!sqe) {   /* the ring holds this one request only */
			errno = EBUSY;
			return -1;
		}
		io_uring_prep_rw((int)IOLAB_OP_EPOLL_WAIT, sqe, w->ep, events, (unsigned)w->max_events, 0);
		w->wait_armed = 1;
		w->c.sqes++;
	}
	if (timeout_ms < 0) {
		ret = io_uring_submit_and_wait(&w->ring, 1);
	} else {
		struct __kernel_timespec ts = { .tv_sec = timeout_ms / 1000,
						.tv_nsec = (long long)(timeout_ms % 1000) * 1000000 };

		ret = io_uring_submit_and_wait_timeout(&w->ring, &cqe, 1, &ts, NULL);
	}
	w->c.enters++;
	if (io_uring_peek_cqe(&w->ring, &cqe) == 0) {
		int res = cqe->res;

		io_uring_cqe_seen(&w->ring, cqe);
		w->wait_armed = 0;
		w->c.wait_cqes++;
		if (res == -EINTR || res == -EAGAIN)
			return 0;
		if (res < 0) {
			errno = -res;
			return -1;
		}
		return res;
	}
	if (ret == -ETIME || ret >= 0)
		return 0;
	errno = -ret;
	return -1;
}

/* --uring-wait: one small ring per event loop, and a kernel that lacks the
 * bridge refused in one line (exit 2, which the sweep records as the
 * cell's reason). */
static void setup_uring_wait(struct worker *w)
{
	struct io_uring_probe *probe;
	int ret = io_uring_queue_init(4, &w->ring, 0);

	if (ret < 0) {
		fprintf(stderr, PROG ": unavailable: --uring-wait cannot set up an io_uring: %s%s\n", strerror(-ret),
			ret == -EPERM || ret == -ENOSYS ? " (io_uring is disabled here: sysctl kernel.io_uring_disabled)" : "");
		exit(2);
	}
	probe = io_uring_get_probe_ring(&w->ring);
	if (!probe || !io_uring_opcode_supported(probe, (int)IOLAB_OP_EPOLL_WAIT)) {
		fprintf(stderr, PROG ": unavailable: this kernel lacks IORING_OP_EPOLL_WAIT "
			"(--uring-wait needs Linux 6.15+)\n");
		exit(2);
	}
	io_uring_free_probe(probe);
	w->uring_wait = 1;
}

static void *run_loop(void *arg)
{
	struct worker *w = arg;
	struct epoll_event *events = calloc((size_t)w->max_events, sizeof(*events));
	char *scratch = malloc(SCRATCH);

	if (!events || !scratch) {
		fprintf(stderr, PROG ": out of memory\n");
		exit(1);
	}
	while (!echo_stop) {
		int timeout = -1;
		int n;

		if (w->accept_resume_ns) {
			uint64_t now = now_ns();

			if (now >= w->accept_resume_ns) {
				struct epoll_event on = { .events = EPOLLIN, .data.fd = w->listen_fd };

				if (epoll_ctl(w->ep, EPOLL_CTL_MOD, w->listen_fd, &on) != 0) {
					fprintf(stderr, PROG ": epoll_ctl: %s\n", strerror(errno));
					exit(1);
				}
				w->accept_resume_ns = 0;
			} else {
				timeout = (int)((w->accept_resume_ns - now) / 1000000ull) + 1;
			}
		}
		n = w->uring_wait ? uring_epoll_wait(w, events, timeout)
				  : epoll_wait(w->ep, events, w->max_events, timeout);
		w->c.waits++;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, PROG ": %s: %s\n", w->uring_wait ? "IORING_OP_EPOLL_WAIT" : "epoll_wait",
				strerror(errno));
			exit(1);
		}
		w->c.events += (uint64_t)n;
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;

			if (fd == w->listen_fd) {
				on_accept(w);
			} else if (events[i].events & EPOLLOUT) {
				on_writable(w, fd);
			} else if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				on_readable(w, fd, scratch);
			}
		}
	}
	free(events);
	free(scratch);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "port", required_argument, NULL, 'p' },
		{ "bind", required_argument, NULL, 'b' },
		{ "threads", required_argument, NULL, 't' },
		{ "max-events", required_argument, NULL, 'm' },
		{ "uring-wait", no_argument, NULL, 'u' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct options o = { .bind = "127.0.0.1", .port = -1, .threads = 1, .max_events = 256 };
	struct echo_counters total = { 0 };
	struct worker *workers;
	char config[256];
	int opt;

	while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'p': o.port = (int)parse_int_flag(PROG, "--port", optarg, 0, 65535); break;
		case 'b': o.bind = optarg; break;
		case 't': o.threads = (int)parse_int_flag(PROG, "--threads", optarg, 1, 1024); break;
		case 'm': o.max_events = (int)parse_int_flag(PROG, "--max-events", optarg, 1, 1 << 20); break;
		case 'u': o.uring_wait = 1; break;
		case 'h': usage(stdout); return 0;
		default: fprintf(stderr, PROG ": bad option; see --help\n"); return 2;
		}
	}
	reject_extra_args(PROG, optind, argc, argv);
	require_flag(PROG, o.port >= 0, "--port");
	install_stop_handlers();
	nconns = raise_nofile(PROG);
	conns = calloc(nconns, sizeof(*conns));
	workers = calloc((size_t)o.threads, sizeof(*workers));
	if (!conns || !workers) {
		fprintf(stderr, PROG ": out of memory for %zu connections\n", nconns);
		return 1;
	}
	for (int i = 0; i < o.threads; i++) {
		struct epoll_event ev = { .events = EPOLLIN };
		struct worker *w = &workers[i];

		/* Port 0: the first listener picks one, the others reuse it. */
		w->listen_fd = listen_tcp(PROG, o.bind, o.port, 1, 1);
		if (o.port == 0) {
			struct sockaddr_in a;
			socklen_t al = sizeof(a);

			if (getsockname(w->listen_fd, (struct sockaddr *)&a, &al) != 0) {
				fprintf(stderr, PROG ": getsockname: %s\n", strerror(errno));
				return 1;
			}
			o.port = ntohs(a.sin_port);
		}
		w->ep = epoll_create1(EPOLL_CLOEXEC);
		w->max_events = o.max_events;
		ev.data.fd = w->listen_fd;
		if (w->ep < 0 || epoll_ctl(w->ep, EPOLL_CTL_ADD, w->listen_fd, &ev) != 0) {
			fprintf(stderr, PROG ": epoll: %s\n", strerror(errno));
			return 1;
		}
		if (o.uring_wait)
			setup_uring_wait(w);
	}
	fprintf(stderr, PROG ": listening on %s:%d\n", o.bind, o.port);
	for (int i = 1; i < o.threads; i++)
		if (pthread_create(&workers[i].thread, NULL, run_loop, &workers[i]) != 0) {
			fprintf(stderr, PROG ": pthread_create failed\n");
			return 1;
		}
	run_loop(&workers[0]);
	/* Wake the other loops out of epoll_wait. */
	for (int i = 1; i < o.threads; i++)
		pthread_kill(workers[i].thread, SIGUSR1);
	for (int i = 1; i < o.threads; i++)
		pthread_join(workers[i].thread, NULL);
	for (int i = 0; i < o.threads; i++) {
		counters_add(&total, &workers[i].c);
		if (workers[i].uring_wait)
			io_uring_queue_exit(&workers[i].ring);   /* cancels a wait still armed */
		close(workers[i].ep);
		close(workers[i].listen_fd);
	}
	for (size_t fd = 0; fd < nconns; fd++)
		if (conns[fd].open) {
			free(conns[fd].pending);
			close((int)fd);
		}
	snprintf(config, sizeof(config),
		 "{\"bind\": \"%s\", \"port\": %d, \"threads\": %d, \"max_events\": %d, \"uring_wait\": %s}",
		 o.bind, o.port, o.threads, o.max_events, o.uring_wait ? "true" : "false");
	print_final(stdout, "epoll", &total, config);
	free(conns);
	free(workers);
	return 0;
}
