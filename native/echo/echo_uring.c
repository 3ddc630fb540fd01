/*
 * echo-uring: a TCP echo server on io_uring (liburing), with one flag for
 * every ring configuration the sources discuss.
 *
 * Per connection, receives and sends alternate with at most one SEND in
 * flight, so bytes are never reordered; a short send is resubmitted for the
 * rest. With provided buffers and multishot receive, chunks queue per
 * connection; when a connection's queue is full its multishot receive is
 * cancelled (backpressure) and re-armed once the queue drains, so a slow
 * reader cannot take the buffers of the others.
 *
 * --rings N runs one ring per thread. Without --granule each ring accepts on
 * its own SO_REUSEPORT listener; with --granule G ring 0 accepts and routes
 * each connection to ring (fd / G) % N with IORING_OP_MSG_RING, as the
 * sources' reactor does. Each ring has its own fd-indexed connection table,
 * touched by its thread only: a descriptor closed on one ring and reused by
 * the kernel for a connection of another never shares state between threads.
 * SIGTERM/SIGINT are blocked in every thread and read from a signalfd by
 * ring 0's thread, at most every STOP_CHECK_MS while it waits; it then wakes
 * the other rings with IORING_OP_MSG_RING. No signal handler interrupts a
 * wait (nor is needed: a sanitizer that defers handlers cannot stall it).
 *
 * SIGTERM/SIGINT: exit 0 with one JSON line of counters. A flag combination
 * we or the kernel refuse exits 2 with a one-line reason; a port in use 3.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <liburing.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdatomic.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../common/cli.h"
#include "../common/timing.h"
#include "../common/uring_compat.h"
#include "config.h"
#include "echo_uring.h"
#include "server.h"

static void setup_ring(struct uring_ctx *r)
{
	struct ring_setup rs = r->o->ring;
	char why[256];
	unsigned features;
	int ret;

	if (r->o->attach_wq && r->idx > 0)
		rs.attach_wq_fd = r->s->rings[0].ring.ring_fd;
	if (r->o->reg_wait) {
		long page = sysconf(_SC_PAGESIZE);

		if (page <= 0 || posix_memalign((void **)&r->wait_region, (size_t)page, (size_t)page) != 0)
			die("allocating a wait region", ENOMEM);
		memset(r->wait_region, 0, (size_t)page);
		/* Ring 0 wakes every STOP_CHECK_MS to look for a stop signal. */
		if (r->idx == 0) {
			r->wait_region->ts.tv_nsec = STOP_CHECK_MS * 1000000L;
			r->wait_region->flags = IOLAB_REG_WAIT_TS;
		}
		r->wait_region->min_wait_usec = r->o->min_wait_us;
		rs.wait_region = r->wait_region;
		rs.wait_region_size = (size_t)page;
	}
	if (ring_setup_init(&rs, &r->ring, &features, why, sizeof(why)) < 0)
		refuse(why);
	if (!(features & IORING_FEAT_FAST_POLL))
		refuse("this kernel lacks IORING_FEAT_FAST_POLL, which the server requires (Linux 5.7+)");
	if (r->o->recv_bundle && !(features & IORING_FEAT_RECVSEND_BUNDLE))
		refuse("unavailable: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE (--recv-bundle needs Linux 6.10+)");
	if (r->o->send_bundle && !(features & IORING_FEAT_RECVSEND_BUNDLE))
		refuse("unavailable: this kernel lacks IORING_FEAT_RECVSEND_BUNDLE (--send-bundle needs Linux 6.10+)");
	if (r->o->send_bundle) {
		/* Each connection's send ring is incremental: try one first. */
		struct io_uring_buf_ring *probe;

		if (posix_memalign((void **)&probe, 4096, sizeof(struct io_uring_buf)) != 0)
			die("allocating a probe buffer ring", ENOMEM);
		ret = register_buf_ring(r, probe, 1, 65535, 1);
		if (ret < 0) {
			snprintf(why, sizeof(why), "unavailable: this kernel refused an incremental send buffer ring "
				 "(IOU_PBUF_RING_INC; --send-bundle needs Linux 6.12+): %s", strerror(-ret));
			refuse(why);
		}
		io_uring_unregister_buf_ring(&r->ring, 65535);
		free(probe);
	}
	if (r->o->min_wait_us && !(features & IORING_FEAT_MIN_TIMEOUT))
		refuse("unavailable: this kernel lacks IORING_FEAT_MIN_TIMEOUT (--min-wait needs Linux 6.12+)");
	if (r->o->fixed_files) {
		ret = io_uring_register_files_sparse(&r->ring, (unsigned)r->s->nconns);
		if (ret < 0) {
			fprintf(stderr, PROG ": --fixed-files: registering a %zu-slot file table: %s\n", r->s->nconns,
				strerror(-ret));
			exit(2);
		}
	}
	if (r->o->send_zc) {
		struct io_uring_probe *probe = io_uring_get_probe_ring(&r->ring);
		int ok = probe && io_uring_opcode_supported(probe, IORING_OP_SEND_ZC);

		io_uring_free_probe(probe);
		if (!ok)
			refuse("unavailable: this kernel lacks IORING_OP_SEND_ZC (--send-zc)");
	}
	if (r->o->iowq_set) {
		ret = io_uring_register_iowq_aff(&r->ring, r->o->iowq_setsize, r->o->iowq_set);
		if (ret < 0) {
			fprintf(stderr, PROG ": --iowq-aff %s: kernel refused IORING_REGISTER_IOWQ_AFF: %s\n",
				r->o->iowq_aff, strerror(-ret));
			exit(2);
		}
	}
	if (r->o->napi_us) {
		struct iolab_uring_napi napi = { .busy_poll_to = r->o->napi_us, .prefer_busy_poll = 1 };

		if (syscall(__NR_io_uring_register, r->ring.ring_fd, IOLAB_REGISTER_NAPI, &napi, 1) < 0) {
			char line[200];

			snprintf(line, sizeof(line),
				 "unavailable: this kernel refused IORING_REGISTER_NAPI (--napi needs Linux 6.9+ "
				 "built with CONFIG_NET_RX_BUSY_POLL): %s", strerror(errno));
			refuse(line);
		}
	}
	setup_buffers(r);
}

static int iowq_workers(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		char path[300], comm[64] = "";
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(comm, sizeof(comm), f) && strncmp(comm, "iou-wrk", 7) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/* Block the stop signals before any thread starts (threads inherit the
 * mask); ring 0 reads them from a signalfd. */
static void block_stop_signals(struct uring_server *s)
{
	sigset_t stop;
	int err;

	install_stop_handlers();   /* SIGPIPE ignored */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	if ((err = pthread_sigmask(SIG_BLOCK, &stop, NULL)) != 0)
		die("pthread_sigmask", err);
	s->stop_fd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
	if (s->stop_fd < 0)
		die("signalfd", errno);
}

/* Every ring with its connection table, listener (one per ring, or ring 0's
 * only with --granule) and ring setup. */
static void open_rings(struct uring_server *s)
{
	s->nconns = raise_nofile(PROG);
	s->rings = calloc((size_t)s->opts.rings, sizeof(*s->rings));
	if (!s->rings)
		die("allocating the rings", ENOMEM);
	for (int i = 0; i < s->opts.rings; i++) {
		struct uring_ctx *r = &s->rings[i];

		r->s = s;
		r->o = &s->opts;
		r->idx = i;
		r->listen_fd = -1;
		r->conns = calloc(s->nconns, sizeof(*r->conns));
		r->starved = calloc(s->nconns, sizeof(*r->starved));
		if (!r->conns || !r->starved) {
			fprintf(stderr, PROG ": out of memory for %zu connections per ring\n", s->nconns);
			exit(1);
		}
		if (i == 0 || s->opts.granule == 0) {
			r->listen_fd = listen_tcp(PROG, s->opts.bind, s->opts.port, s->opts.rings > 1, 0);
			if (s->opts.port == 0) {
				struct sockaddr_in a;
				socklen_t al = sizeof(a);

				if (getsockname(r->listen_fd, (struct sockaddr *)&a, &al) != 0)
					die("getsockname", errno);
				s->opts.port = ntohs(a.sin_port);
			}
		}
		setup_ring(r);
	}
}

/* Close what the s->rings still hold: open connections, their queued chunks, the s->rings. */
static void close_rings(struct uring_server *s)
{
	for (int i = 0; i < s->opts.rings; i++) {
		struct uconn *conns = s->rings[i].conns;

		for (size_t fd = 0; fd < s->nconns; fd++) {
			if (!conns[fd].open)
				continue;
			while (conns[fd].head) {
				struct chunk *ch = conns[fd].head;

				conns[fd].head = ch->next;
				if (ch->bid == COPIED)
					free(ch->data);
				free(ch);
			}
			free(conns[fd].buf);
			free(conns[fd].gather);
			close((int)fd);
		}
	}
	for (int i = 0; i < s->opts.rings; i++) {
		io_uring_queue_exit(&s->rings[i].ring);
		/* The send s->rings (--send-bundle) once the kernel let go of them. */
		for (size_t fd = 0; fd < s->nconns; fd++)
			if (s->rings[i].conns[fd].open)
				free(s->rings[i].conns[fd].send_br);
		if (s->rings[i].listen_fd >= 0)
			close(s->rings[i].listen_fd);
		free(s->rings[i].bufs);
		free(s->rings[i].br);
		free(s->rings[i].slot_bid);
		free(s->rings[i].pos_of_bid);
		free(s->rings[i].bundle_bids);
		free(s->rings[i].inc_used);
		free(s->rings[i].inc_refs);
		free(s->rings[i].inc_retired);
		free(s->rings[i].wait_region);   /* the ring that pinned it is gone */
		free(s->rings[i].starved);
		free(s->rings[i].conns);
	}
	free(s->rings);
}

/* The counters summed over s->rings, with the configuration that ran. */
static void print_counters(const struct uring_server *s, int iowq)
{
	struct echo_counters total = { 0 };
	char *config = options_json(&s->opts, iowq);

	for (int i = 0; i < s->opts.rings; i++)
		counters_add(&total, &s->rings[i].c);
	print_final(stdout, "uring", &total, config);
	free(config);
}

int main(int argc, char **argv)
{
	/* Every thread is joined before this returns. */
	struct uring_server server = { .stop_fd = -1 };
	struct uring_server *s = &server;
	int iowq;

	options_parse(&s->opts, argc, argv);
	/* The kernel copies the timeout at submission; one value serves every SQE. */
	s->link_ts.tv_sec = s->opts.link_timeout_ms / 1000;
	s->link_ts.tv_nsec = (long long)(s->opts.link_timeout_ms % 1000) * 1000000;
	block_stop_signals(s);
	open_rings(s);
	fprintf(stderr, PROG ": listening on %s:%d\n", s->opts.bind, s->opts.port);
	for (int i = 1; i < s->opts.rings; i++) {
		int err = pthread_create(&s->rings[i].thread, NULL, run_ring, &s->rings[i]);

		if (err != 0)
			die("pthread_create", err);
	}
	run_ring(&s->rings[0]);
	for (int i = 1; i < s->opts.rings; i++)
		pthread_join(s->rings[i].thread, NULL);
	close(s->stop_fd);
	iowq = iowq_workers();   /* before the rings (and their io-wq) go */
	print_counters(s, iowq);
	close_rings(s);
	CPU_FREE(s->opts.iowq_set);
	return 0;
}
