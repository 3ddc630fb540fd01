#define _GNU_SOURCE
#include "server.h"
#include "../common/timing.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

volatile sig_atomic_t echo_stop;

void counters_add(struct echo_counters *into, const struct echo_counters *c)
{
	into->requests += c->requests;
	into->bytes += c->bytes;
	into->accepted += c->accepted;
	into->closed += c->closed;
	into->waits += c->waits;
	into->enters += c->enters;
	into->submits += c->submits;
	into->events += c->events;
	into->sqes += c->sqes;
	into->short_writes += c->short_writes;
	into->async_sqes += c->async_sqes;
	into->timeouts += c->timeouts;
	into->nobufs += c->nobufs;
	into->zc_notifs += c->zc_notifs;
	into->would_block += c->would_block;
	into->recv_buffers += c->recv_buffers;
	into->buf_more += c->buf_more;
	into->bufs_retired += c->bufs_retired;
	into->rearms += c->rearms;
	into->send_buffers += c->send_buffers;
	into->napi_checked += c->napi_checked;
	into->wait_cqes += c->wait_cqes;
	into->napi_conns += c->napi_conns;
	into->zc_copied += c->zc_copied;
	into->zc_fixed += c->zc_fixed;
	for (int i = 0; i < BUFS_HIST_BINS; i++) {
		into->recv_bufs_hist[i] += c->recv_bufs_hist[i];
		into->send_bufs_hist[i] += c->send_bufs_hist[i];
	}
}

int accept_should_pause(int err)
{
	return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM;
}

void accept_paused(const char *prog, struct accept_pause *p, int err)
{
	uint64_t now = now_ns();

	p->unreported++;
	if (p->last_report_ns && now - p->last_report_ns < 1000000000ull)
		return;
	fprintf(stderr, "%s: accept: %s (%llu time%s since the last report); pausing accepts for %d ms, "
		"serving the open connections; raise the open-file limit (ulimit -n)\n", prog, strerror(err),
		(unsigned long long)p->unreported, p->unreported == 1 ? "" : "s", ACCEPT_PAUSE_MS);
	p->last_report_ns = now;
	p->unreported = 0;
}

static void on_stop(int sig)
{
	(void)sig;
	echo_stop = 1;
}

static void on_wake(int sig)
{
	(void)sig;
}

void install_stop_handlers(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_stop;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = on_wake;
	sigaction(SIGUSR1, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

size_t raise_nofile(const char *prog)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
		fprintf(stderr, "%s: getrlimit(RLIMIT_NOFILE): %s\n", prog, strerror(errno));
		exit(1);
	}
	if (rl.rlim_cur != rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
			fprintf(stderr, "%s: setrlimit(RLIMIT_NOFILE): %s\n", prog, strerror(errno));
			exit(1);
		}
	}
	/* RLIM_INFINITY is not a table size; cap at what the kernel allows. */
	if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > (1u << 24))
		rl.rlim_cur = 1u << 24;
	return (size_t)rl.rlim_cur;
}

int listen_tcp(const char *prog, const char *bind_addr, int port, int reuseport, int nonblock)
{
	struct sockaddr_in addr;
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);

	if (fd < 0) {
		fprintf(stderr, "%s: socket: %s\n", prog, strerror(errno));
		exit(1);
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, bind_addr, &addr.sin_addr) != 1) {
		fprintf(stderr, "%s: --bind %s: not an IPv4 address\n", prog, bind_addr);
		exit(2);
	}
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    (reuseport && setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0)) {
		fprintf(stderr, "%s: setsockopt: %s\n", prog, strerror(errno));
		exit(1);
	}
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0) {
		fprintf(stderr, "%s: cannot listen on %s:%d: %s\n", prog, bind_addr, port, strerror(errno));
		exit(errno == EADDRINUSE ? 3 : 1);
	}
	if (listen(fd, 4096) != 0) {
		fprintf(stderr, "%s: listen: %s\n", prog, strerror(errno));
		exit(1);
	}
	return fd;
}

int set_nodelay(int fd)
{
	int one = 1;

	return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static uint64_t tv_ns(struct timeval tv)
{
	return (uint64_t)tv.tv_sec * 1000000000u + (uint64_t)tv.tv_usec * 1000u;
}

void print_final(FILE *out, const char *server, const struct echo_counters *c,
		 const char *config_json)
{
	struct rusage ru;
	int uring = strcmp(server, "uring") == 0;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		memset(&ru, 0, sizeof(ru));
	fprintf(out,
		"{\"server\": \"%s\", \"requests\": %llu, \"bytes\": %llu, \"accepted\": %llu, "
		"\"closed\": %llu, \"waits\": %llu, \"events\": %llu, \"io_uring_enter\": %llu, \"submits\": %llu, "
		"\"sqes\": %llu, \"cqes\": %llu, \"short_writes\": %llu, \"async_sqes\": %llu, "
		"\"link_timeouts\": %llu, \"nobufs\": %llu, \"zc_notifs\": %llu, \"would_block\": %llu, "
		"\"user_cpu_ns\": %llu, \"sys_cpu_ns\": %llu, \"recv_buffers\": %llu, "
		"\"recv_bufs_hist\": [%llu, %llu, %llu, %llu, %llu, %llu, %llu, %llu], \"buf_more\": %llu, "
		"\"bufs_retired\": %llu, \"rearms\": %llu, \"send_buffers\": %llu, "
		"\"send_bufs_hist\": [%llu, %llu, %llu, %llu, %llu, %llu, %llu, %llu], \"napi_checked\": %llu, "
		"\"napi_conns\": %llu, \"zc_copied\": %llu, \"zc_fixed\": %llu, \"config\": %s}\n",
		server, (unsigned long long)c->requests, (unsigned long long)c->bytes,
		(unsigned long long)c->accepted, (unsigned long long)c->closed,
		(unsigned long long)c->waits, (unsigned long long)c->events,
		(unsigned long long)c->enters, (unsigned long long)c->submits,
		(unsigned long long)c->sqes,
		(unsigned long long)(uring ? c->events : c->wait_cqes), (unsigned long long)c->short_writes,
		(unsigned long long)c->async_sqes, (unsigned long long)c->timeouts,
		(unsigned long long)c->nobufs, (unsigned long long)c->zc_notifs,
		(unsigned long long)c->would_block, (unsigned long long)tv_ns(ru.ru_utime), (unsigned long long)tv_ns(ru.ru_stime),
		(unsigned long long)c->recv_buffers, (unsigned long long)c->recv_bufs_hist[0],
		(unsigned long long)c->recv_bufs_hist[1], (unsigned long long)c->recv_bufs_hist[2],
		(unsigned long long)c->recv_bufs_hist[3], (unsigned long long)c->recv_bufs_hist[4],
		(unsigned long long)c->recv_bufs_hist[5], (unsigned long long)c->recv_bufs_hist[6],
		(unsigned long long)c->recv_bufs_hist[7], (unsigned long long)c->buf_more,
		(unsigned long long)c->bufs_retired, (unsigned long long)c->rearms,
		(unsigned long long)c->send_buffers, (unsigned long long)c->send_bufs_hist[0],
		(unsigned long long)c->send_bufs_hist[1], (unsigned long long)c->send_bufs_hist[2],
		(unsigned long long)c->send_bufs_hist[3], (unsigned long long)c->send_bufs_hist[4],
		(unsigned long long)c->send_bufs_hist[5], (unsigned long long)c->send_bufs_hist[6],
		(unsigned long long)c->send_bufs_hist[7], (unsigned long long)c->napi_checked,
		(unsigned long long)c->napi_conns, (unsigned long long)c->zc_copied,
		(unsigned long long)c->zc_fixed, config_json);
	fflush(out);
}
