// The Go echo servers: Go's net package and an io_uring reactor written on
// raw system calls (no cgo), as the Habr series' systems were. Kept
// compatible with Debian 12's Go (1.19), which ./repro installs where no Go
// toolchain is found.
module iolab/native/go

go 1.19

require golang.org/x/sys v0.30.0
