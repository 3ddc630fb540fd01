// echo-go-net: a TCP echo server on Go's standard net package, one
// goroutine per connection: the baseline the Habr series ran its io_uring
// reactor against (labelled net/http there).
//
// The source's example server (go-uring's example/echo-server-multi-thread,
// which the article links as its method) took each *net.TCPConn's File()
// and that file's Fd() to index a buffer table. File() duplicates the
// descriptor, and Fd() switches the duplicate to blocking mode; the two
// share one open file description, so the connection itself becomes
// blocking, and every Read and Write then blocks an OS thread of its own
// instead of parking on the netpoller. --blocking-file does the same.
// The source also left GOMAXPROCS at Go's default in this mode (it set
// 2 x NumCPU only for its io_uring modes), which is our default too.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"runtime/debug"

	"iolab/native/go/internal/serve"
)

const prog = "echo-go-net"

func usage() {
	fmt.Fprintf(flag.CommandLine.Output(), `usage: %s [OPTIONS]

TCP echo server on Go's net package: one goroutine per connection, reading
and writing back whatever arrives. Prints one JSON line of counters and
exits 0 on SIGTERM or SIGINT.

`, prog)
	flag.PrintDefaults()
}

func main() {
	port := flag.Int("port", -1, "TCP port to listen on (required; 0 picks a free one, reported on stderr as 'listening on ADDR:PORT')")
	bind := flag.String("bind", "127.0.0.1", "IPv4 address to bind")
	procs := flag.Int("gomaxprocs", runtime.GOMAXPROCS(0), "GOMAXPROCS (default: Go's own, the CPUs this process may run on, as the source's server left it in this mode)")
	blocking := flag.Bool("blocking-file", false, "take each connection's File() and Fd(), as the source's handler did: the socket turns blocking, and each Read and Write blocks an OS thread")
	bufSize := flag.Int("buf-size", 32<<10, "read buffer per connection, bytes")
	flag.Usage = usage
	flag.Parse()
	if flag.NArg() > 0 {
		serve.Fail(prog, 2, "unexpected argument %q (see --help)", flag.Arg(0))
	}
	if *port < 0 || *port > 65535 {
		serve.Fail(prog, 2, "--port must be 0..65535 (0: a free port)")
	}
	if *procs < 1 || *bufSize < 1 {
		serve.Fail(prog, 2, "--gomaxprocs and --buf-size must be positive")
	}
	runtime.GOMAXPROCS(*procs)
	nofile := serve.RaiseNofile(prog)
	if *blocking {
		// Each blocked connection holds an OS thread: up to one per
		// descriptor. Go stops the program at 10,000 threads by default;
		// the descriptor table is the limit here.
		if limit := nofile + 1000; limit > 10000 {
			debug.SetMaxThreads(limit)
		}
	}
	stop := serve.StopSignals()

	fd, bound := serve.Listen(prog, *bind, *port, false)
	f := os.NewFile(uintptr(fd), "listener")
	ln, err := net.FileListener(f)
	if err != nil {
		serve.Fail(prog, 1, "listener: %v", err)
	}
	f.Close() // FileListener holds its own copy of the fd
	var c serve.Counters
	serve.Announce(prog, *bind, bound)

	go func() {
		var pause serve.Pause
		for {
			conn, err := ln.Accept()
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					continue
				}
				if pause.AcceptFailed(prog, err) {
					continue
				}
				serve.Fail(prog, 1, "accept: %v", err)
			}
			c.Accepted.Add(1)
			go echo(conn, &c, *bufSize, *blocking)
		}
	}()
	<-stop
	serve.PrintFinal("go-net", &c, map[string]any{"gomaxprocs": *procs, "buf_size": *bufSize,
		"blocking_file": *blocking, "go": runtime.Version()})
}

// echo writes back every byte read until the peer closes or an error ends
// the connection.
func echo(conn net.Conn, c *serve.Counters, bufSize int, blocking bool) {
	defer func() {
		conn.Close()
		c.Closed.Add(1)
	}()
	if blocking {
		f, err := conn.(*net.TCPConn).File()
		if err != nil {
			return
		}
		f.Fd() // the source's handler: the shared socket becomes blocking
		// It stays blocking without the duplicate (the mode belongs to the
		// open file description both share): close it, so a connection
		// holds one descriptor, not two.
		f.Close()
	}
	buf := make([]byte, bufSize)
	for {
		n, err := conn.Read(buf)
		if n > 0 {
			c.Requests.Add(1)
			c.Bytes.Add(uint64(n))
			if _, werr := conn.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
