// echo-go-uring: a TCP echo server on an io_uring network reactor written
// in pure Go, with the architecture of the Habr series' reactor:
//   - one event loop per ring, its consumer (reaps completions, runs the
//     callbacks) and its publisher (submits on a signal) each locked to an
//     OS thread;
//   - a callback registry preallocated per fd;
//   - fd -> ring routing by (fd / granule) % rings;
//   - rings sharing io-wq worker pools (IORING_SETUP_ATTACH_WQ);
//   - link-timeout deadlines on receives;
//   - an SQPOLL mode.
//
// Accepting is a blocking accept4 loop on its own goroutine, which hands each
// new fd to its ring's consumer through a NOP, so a connection's state is
// only ever touched by the consumer of the ring that owns it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"iolab/native/go/internal/serve"
	"iolab/native/go/internal/uring"
)

const prog = "echo-go-uring"

// What a completion is for, in the low byte of its user_data; the fd sits
// in the high 32 bits and the connection's generation in between, so a late
// completion for a closed connection cannot act on the next one with its fd.
const (
	opNew = iota + 1
	opRecv
	opSend
	opTimeout
)

func userData(fd int, gen uint32, op uint8) uint64 {
	return uint64(fd)<<32 | uint64(gen&0xffffff)<<8 | uint64(op)
}

type conn struct {
	gen      uint32
	open     bool
	buf      []byte
	filled   int
	sent     int
	deadline unix.Timespec // read by the kernel when the link timeout is submitted
}

type options struct {
	rings, granule, pools, entries, bufSize int
	sqpoll                                  bool
	sqIdleMs                                int
	linkTimeoutMs                           int
}

type loop struct {
	id     int
	ring   *uring.Ring
	mu     sync.Mutex // the submission side: filling SQEs and publishing them
	signal chan struct{}
	conns  []conn // the registry, shared: indexed by fd, each entry used by its fd's loop only
	opt    *options
	c      *serve.Counters
}

func (l *loop) sqe() *uring.SQE {
	for {
		if s := l.ring.GetSQE(); s != nil {
			l.c.SQEs.Add(1)
			return s
		}
		// Full: let the publisher (or the SQ thread) drain it.
		l.mu.Unlock()
		l.kick()
		runtime.Gosched()
		l.mu.Lock()
	}
}

// kick is the submit signal; it never blocks and coalesces.
func (l *loop) kick() {
	select {
	case l.signal <- struct{}{}:
	default:
	}
}

func (l *loop) queueNew(fd int) {
	l.mu.Lock()
	s := l.sqe()
	s.Opcode = uring.OpNop
	s.UserData = userData(fd, 0, opNew)
	l.mu.Unlock()
	l.kick()
}

func (l *loop) queueRecv(fd int, cn *conn) {
	l.mu.Lock()
	s := l.sqe()
	s.Opcode, s.Fd = uring.OpRecv, int32(fd)
	s.Addr, s.Len = uint64(uintptr(unsafe.Pointer(&cn.buf[0]))), uint32(len(cn.buf))
	s.UserData = userData(fd, cn.gen, opRecv)
	if l.opt.linkTimeoutMs > 0 {
		s.Flags |= uring.SQELink
		t := l.sqe()
		t.Opcode = uring.OpLinkTimeout
		t.Addr, t.Len = uint64(uintptr(unsafe.Pointer(&cn.deadline))), 1
		t.UserData = userData(fd, cn.gen, opTimeout)
	}
	l.mu.Unlock()
}

func (l *loop) queueSend(fd int, cn *conn) {
	l.mu.Lock()
	s := l.sqe()
	s.Opcode, s.Fd = uring.OpSend, int32(fd)
	s.Addr = uint64(uintptr(unsafe.Pointer(&cn.buf[cn.sent])))
	s.Len, s.OpFlags = uint32(cn.filled-cn.sent), unix.MSG_NOSIGNAL
	s.UserData = userData(fd, cn.gen, opSend)
	l.mu.Unlock()
}

func (l *loop) closeConn(fd int, cn *conn) {
	cn.open = false
	cn.gen++
	if err := unix.Close(fd); err != nil {
		serve.Fail(prog, 1, "close: %v", err)
	}
	l.c.Closed.Add(1)
}

// complete is the callback registry's dispatch: the fd's entry, then the op.
func (l *loop) complete(cqe uring.CQE) {
	fd, gen, op := int(cqe.UserData>>32), uint32(cqe.UserData>>8)&0xffffff, uint8(cqe.UserData)
	cn := &l.conns[fd]
	switch {
	case op == opNew:
		if len(cn.buf) != l.opt.bufSize {
			cn.buf = make([]byte, l.opt.bufSize)
		}
		cn.open, cn.filled, cn.sent = true, 0, 0
		cn.deadline = unix.NsecToTimespec(int64(l.opt.linkTimeoutMs) * 1e6)
		l.queueRecv(fd, cn)
	case op == opTimeout:
		// -ETIME: the deadline fired and cancelled the receive, which
		// completes on its own with -ECANCELED.
		if cqe.Res == -int32(unix.ETIME) {
			l.c.LinkTimeouts.Add(1)
		}
	case !cn.open || gen != cn.gen&0xffffff:
		// A completion for a connection already closed.
	case op == opRecv:
		if cqe.Res <= 0 {
			l.closeConn(fd, cn)
			return
		}
		l.c.Requests.Add(1)
		l.c.Bytes.Add(uint64(cqe.Res))
		cn.filled, cn.sent = int(cqe.Res), 0
		l.queueSend(fd, cn)
	case op == opSend:
		if cqe.Res < 0 {
			l.closeConn(fd, cn)
			return
		}
		cn.sent += int(cqe.Res)
		if cn.sent < cn.filled {
			l.c.ShortWrites.Add(1)
			l.queueSend(fd, cn)
			return
		}
		l.queueRecv(fd, cn)
	}
}

// consume reaps completions and runs their callbacks; when there are none
// it waits in io_uring_enter. Its submissions go through the publisher.
func (l *loop) consume() {
	runtime.LockOSThread()
	for {
		n := l.ring.Reap(l.complete)
		if n > 0 {
			l.c.CQEs.Add(uint64(n))
			l.c.Events.Add(uint64(n))
			l.kick()
			continue
		}
		l.c.Waits.Add(1)
		l.c.Enters.Add(1)
		if _, err := l.ring.Enter(0, 1, uring.EnterGetEvents); err != nil && err != unix.EBUSY {
			serve.Fail(prog, 1, "ring %d: io_uring_enter (wait): %v", l.id, err)
		}
	}
}

// publish submits whatever the callbacks queued, each time it is signalled.
func (l *loop) publish() {
	runtime.LockOSThread()
	for range l.signal {
		l.mu.Lock()
		pending := l.ring.Flush()
		l.mu.Unlock()
		if pending == 0 {
			continue
		}
		if l.opt.sqpoll {
			if l.ring.NeedsWakeup() {
				l.c.Enters.Add(1)
				l.c.Submits.Add(1)
				if _, err := l.ring.Enter(0, 0, uring.EnterSQWakeup); err != nil {
					serve.Fail(prog, 1, "ring %d: io_uring_enter (wake the SQ thread): %v", l.id, err)
				}
			}
			// The SQ thread consumes on its own: it sets NEED_WAKEUP and
			// looks at the queue once more before it sleeps, so nothing
			// published here is left behind.
			continue
		}
		l.c.Enters.Add(1)
		l.c.Submits.Add(1)
		_, err := l.ring.Enter(pending, 0, 0)
		switch {
		case err == unix.EBUSY || err == unix.EAGAIN:
			// Completions overflowed or the kernel is short of memory: let
			// the consumer reap, then submit again.
			runtime.Gosched()
			l.kick()
		case err != nil:
			serve.Fail(prog, 1, "ring %d: io_uring_enter (submit): %v", l.id, err)
		}
	}
}

func iowqWorkers() int {
	tasks, _ := filepath.Glob("/proc/self/task/*/comm")
	n := 0
	for _, t := range tasks {
		if b, err := os.ReadFile(t); err == nil && strings.HasPrefix(string(b), "iou-wrk") {
			n++
		}
	}
	return n
}

func usage() {
	fmt.Fprintf(flag.CommandLine.Output(), `usage: %s [OPTIONS]

TCP echo server on a pure-Go io_uring reactor: rings with an event loop each
(a consumer and a publisher locked to OS threads), fds routed to rings by
(fd / granule) %% rings, rings sharing io-wq worker pools. Prints one JSON line
of counters and exits 0 on SIGTERM or SIGINT; exits 2 when the kernel refuses
the ring configuration.

`, prog)
	flag.PrintDefaults()
}

func main() {
	cpus := runtime.NumCPU()
	rings := 2*cpus - 2
	if rings < 1 {
		rings = 1
	}
	var o options
	port := flag.Int("port", -1, "TCP port to listen on (required; 0 picks a free one, reported on stderr as 'listening on ADDR:PORT')")
	bind := flag.String("bind", "127.0.0.1", "IPv4 address to bind")
	procs := flag.Int("gomaxprocs", 2*cpus, "GOMAXPROCS; the source's setting, twice the CPUs this process may run on, by default")
	flag.IntVar(&o.rings, "rings", rings, "rings, one event loop each; the source's 2 x CPUs - 2 (at least 1) by default")
	flag.IntVar(&o.granule, "granule", 75, "consecutive fds routed to one ring")
	flag.IntVar(&o.pools, "worker-pools", 2, "io-wq worker pools the rings share (IORING_SETUP_ATTACH_WQ); at most --rings")
	flag.IntVar(&o.entries, "entries", 4096, "submission queue entries per ring (the completion queue has 4 times as many)")
	flag.IntVar(&o.bufSize, "buf-size", 4096, "receive buffer per connection, bytes")
	flag.BoolVar(&o.sqpoll, "sqpoll", false, "a kernel thread polls each submission queue (IORING_SETUP_SQPOLL)")
	flag.IntVar(&o.sqIdleMs, "sq-thread-idle", 1000, "with --sqpoll: ms of idleness before the SQ thread sleeps")
	flag.IntVar(&o.linkTimeoutMs, "link-timeout", 0, "close a connection that sends nothing for this many ms (a linked timeout on each receive); 0: no deadline")
	flag.Usage = usage
	flag.Parse()
	if flag.NArg() > 0 {
		serve.Fail(prog, 2, "unexpected argument %q (see --help)", flag.Arg(0))
	}
	switch {
	case *port < 0 || *port > 65535:
		serve.Fail(prog, 2, "--port must be 0..65535 (0: a free port)")
	case *procs < 1 || o.rings < 1 || o.granule < 1 || o.pools < 1 || o.entries < 2 || o.bufSize < 1:
		serve.Fail(prog, 2, "--gomaxprocs, --rings, --granule, --worker-pools and --buf-size must be positive, --entries at least 2")
	case o.sqIdleMs < 0 || o.linkTimeoutMs < 0:
		serve.Fail(prog, 2, "--sq-thread-idle and --link-timeout must not be negative")
	}
	if o.pools > o.rings {
		o.pools = o.rings
	}
	runtime.GOMAXPROCS(*procs)
	nofile := serve.RaiseNofile(prog)
	stop := serve.StopSignals()
	var c serve.Counters

	registry := make([]conn, nofile)
	loops := make([]*loop, o.rings)
	for i := range loops {
		p := uring.Params{Flags: uring.SetupCQSize, CQEntries: uint32(4 * o.entries)}
		if o.sqpoll {
			p.Flags |= uring.SetupSQPoll
			p.SQThreadIdle = uint32(o.sqIdleMs)
		}
		if i >= o.pools {
			p.Flags |= uring.SetupAttachWQ
			p.WQFd = uint32(loops[i%o.pools].ring.Fd)
		}
		r, err := uring.New(uint32(o.entries), p)
		if err != nil {
			serve.Fail(prog, 2, "ring %d: %v", i, err)
		}
		loops[i] = &loop{id: i, ring: r, signal: make(chan struct{}, 1), conns: registry, opt: &o, c: &c}
	}
	lfd, bound := serve.Listen(prog, *bind, *port, false)
	for _, l := range loops {
		go l.consume()
		go l.publish()
	}
	serve.Announce(prog, *bind, bound)

	go func() {
		var pause serve.Pause
		for {
			fd, _, err := unix.Accept4(lfd, unix.SOCK_CLOEXEC)
			if err == unix.EINTR || err == unix.ECONNABORTED {
				continue
			}
			if err != nil && pause.AcceptFailed(prog, err) {
				continue
			}
			if err != nil {
				serve.Fail(prog, 1, "accept: %v", err)
			}
			if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
				serve.Fail(prog, 1, "setsockopt(TCP_NODELAY): %v", err)
			}
			c.Accepted.Add(1)
			loops[(fd/o.granule)%len(loops)].queueNew(fd)
		}
	}()
	<-stop
	serve.PrintFinal("go-uring", &c, map[string]any{
		"rings": o.rings, "granule": o.granule, "worker_pools": o.pools, "entries": o.entries,
		"sqpoll": o.sqpoll, "link_timeout_ms": o.linkTimeoutMs, "gomaxprocs": *procs,
		"iowq_workers_at_exit": iowqWorkers(), "go": runtime.Version(),
	})
}
