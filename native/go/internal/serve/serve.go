// Package serve holds what every Go echo server shares with the C ones
// (native/echo/server.c): the listening socket, the exit statuses the sweep
// reads (2: configuration refused, 3: port in use), the open-file limit, and
// the final JSON line of counters printed on SIGTERM or SIGINT.
package serve

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Counters are updated by any goroutine; the field names are the C servers'.
type Counters struct {
	Requests, Bytes, Accepted, Closed, Waits, Events    atomic.Uint64
	Enters, Submits, SQEs, CQEs, ShortWrites, AsyncSQEs atomic.Uint64
	LinkTimeouts                                        atomic.Uint64
}

// AcceptPause is how long accepting pauses when the descriptor table is
// full (EMFILE, ENFILE) or memory is short: the connection stays queued, so
// accepting again at once would fail again.
const AcceptPause = 10 * time.Millisecond

// Pause counts refused accepts and reports them at most once per second.
type Pause struct {
	last       time.Time
	unreported int
}

// AcceptFailed reports whether err is one to pause on; if so it reports it
// (at most once per second, with a count) and sleeps AcceptPause.
func (p *Pause) AcceptFailed(prog string, err error) bool {
	if !errors.Is(err, unix.EMFILE) && !errors.Is(err, unix.ENFILE) && !errors.Is(err, unix.ENOBUFS) &&
		!errors.Is(err, unix.ENOMEM) {
		return false
	}
	p.unreported++
	if now := time.Now(); now.Sub(p.last) >= time.Second {
		s := "s"
		if p.unreported == 1 {
			s = ""
		}
		fmt.Fprintf(os.Stderr, "%s: accept: %v (%d time%s since the last report); pausing accepts for %d ms, "+
			"serving the open connections; raise the open-file limit (ulimit -n)\n", prog, err, p.unreported, s,
			AcceptPause.Milliseconds())
		p.last, p.unreported = now, 0
	}
	time.Sleep(AcceptPause)
	return true
}

// Fail prints "prog: message" and exits with status.
func Fail(prog string, status int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s: %s\n", prog, fmt.Sprintf(format, args...))
	os.Exit(status)
}

// RaiseNofile lifts the soft open-file limit to the hard one (10 000
// connections need it) and returns the limit.
func RaiseNofile(prog string) int {
	// The runtime creates its netpoller (an epoll fd) on the first timer; a
	// server that first sleeps when its descriptor table is full (the accept
	// pause) would die in netpollinit. Create it now, while fds are free.
	time.Sleep(time.Microsecond)
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		Fail(prog, 1, "getrlimit(RLIMIT_NOFILE): %v", err)
	}
	if rl.Cur != rl.Max {
		rl.Cur = rl.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
			Fail(prog, 1, "setrlimit(RLIMIT_NOFILE): %v", err)
		}
	}
	if rl.Cur > 1<<24 {
		return 1 << 24
	}
	return int(rl.Cur)
}

// Listen opens a blocking IPv4 TCP listener (SO_REUSEADDR, and SO_REUSEPORT
// when asked) and returns its fd and port. Exits 2 on a bad address and 3
// when the port is taken, as the C servers do.
func Listen(prog, bind string, port int, reuseport bool) (int, int) {
	ip := net.ParseIP(bind).To4()
	if ip == nil {
		Fail(prog, 2, "--bind %s: not an IPv4 address", bind)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		Fail(prog, 1, "socket: %v", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		Fail(prog, 1, "setsockopt: %v", err)
	}
	if reuseport {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			Fail(prog, 1, "setsockopt: %v", err)
		}
	}
	sa := &unix.SockaddrInet4{Port: port}
	copy(sa.Addr[:], ip)
	if err := unix.Bind(fd, sa); err != nil {
		status := 1
		if err == unix.EADDRINUSE {
			status = 3
		}
		Fail(prog, status, "cannot listen on %s:%d: %v", bind, port, err)
	}
	if err := unix.Listen(fd, 4096); err != nil {
		Fail(prog, 1, "listen: %v", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		Fail(prog, 1, "getsockname: %v", err)
	}
	return fd, got.(*unix.SockaddrInet4).Port
}

// Announce prints the line the sweep and the tests wait for.
func Announce(prog, bind string, port int) {
	fmt.Fprintf(os.Stderr, "%s: listening on %s:%d\n", prog, bind, port)
}

// StopSignals delivers SIGTERM and SIGINT on the returned channel.
func StopSignals() <-chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGTERM, syscall.SIGINT)
	signal.Ignore(syscall.SIGPIPE)
	return ch
}

func tvNs(tv unix.Timeval) uint64 { return uint64(tv.Sec)*1e9 + uint64(tv.Usec)*1e3 }

// PrintFinal writes the counters as one JSON line on stdout, with the
// process's CPU time (every thread, the kernel's io_uring threads included).
func PrintFinal(server string, c *Counters, config map[string]any) {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		ru = unix.Rusage{}
	}
	out := map[string]any{
		"server": server, "requests": c.Requests.Load(), "bytes": c.Bytes.Load(),
		"accepted": c.Accepted.Load(), "closed": c.Closed.Load(), "waits": c.Waits.Load(),
		"events": c.Events.Load(), "io_uring_enter": c.Enters.Load(), "submits": c.Submits.Load(),
		"sqes": c.SQEs.Load(), "cqes": c.CQEs.Load(), "short_writes": c.ShortWrites.Load(),
		"async_sqes": c.AsyncSQEs.Load(), "link_timeouts": c.LinkTimeouts.Load(), "nobufs": 0,
		"zc_notifs": 0, "user_cpu_ns": tvNs(ru.Utime), "sys_cpu_ns": tvNs(ru.Stime), "config": config,
	}
	line, err := json.Marshal(out)
	if err != nil {
		Fail(server, 1, "counters: %v", err)
	}
	fmt.Println(string(line))
}
