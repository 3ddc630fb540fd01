// Package uring is a minimal io_uring binding on raw system calls: setup,
// the mmap'd submission and completion rings, and io_uring_enter. It holds
// what the reactor needs and nothing else; the ABI values are the kernel's
// (include/uapi/linux/io_uring.h).
package uring

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags.
const (
	SetupSQPoll   = 1 << 1
	SetupSQAff    = 1 << 2
	SetupCQSize   = 1 << 3
	SetupAttachWQ = 1 << 5
)

// Enter flags and SQ ring flags.
const (
	EnterGetEvents = 1 << 0
	EnterSQWakeup  = 1 << 1
	sqNeedWakeup   = 1 << 0
)

// Opcodes.
const (
	OpNop         = 0
	OpAccept      = 13
	OpLinkTimeout = 15
	OpClose       = 19
	OpSend        = 26
	OpRecv        = 27
)

// SQE flags.
const (
	SQELink  = 1 << 2
	SQEAsync = 1 << 4
)

const (
	offSQRing = 0
	offCQRing = 0x8000000
	offSQEs   = 0x10000000
	// IORING_FEAT_SINGLE_MMAP: SQ and CQ rings share one mapping.
	featSingleMmap = 1 << 0
)

type sqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Flags, Dropped, Array, Resv1 uint32
	UserAddr                                                        uint64
}

type cqringOffsets struct {
	Head, Tail, RingMask, RingEntries, Overflow, Cqes, Flags, Resv1 uint32
	UserAddr                                                        uint64
}

// Params is struct io_uring_params.
type Params struct {
	SQEntries, CQEntries, Flags, SQThreadCPU, SQThreadIdle, Features, WQFd uint32
	Resv                                                                   [3]uint32
	SQOff                                                                  sqringOffsets
	CQOff                                                                  cqringOffsets
}

// SQE is struct io_uring_sqe (64 bytes).
type SQE struct {
	Opcode      uint8
	Flags       uint8
	Ioprio      uint16
	Fd          int32
	Off         uint64
	Addr        uint64
	Len         uint32
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16
	Personality uint16
	SpliceFdIn  int32
	Addr3       uint64
	pad         uint64
}

// CQE is struct io_uring_cqe (16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// Ring is one io_uring instance. Submission and completion may run on
// different threads: the caller serialises each side on its own.
type Ring struct {
	Fd     int
	Params Params
	sqMem  []byte
	cqMem  []byte
	sqeMem []byte

	sqHead, sqTail, sqMask, sqFlags, sqArray unsafe.Pointer
	cqHead, cqTail, cqMask                   unsafe.Pointer
	sqes                                     unsafe.Pointer
	cqes                                     unsafe.Pointer
	sqEntries                                uint32
	singleMmap                               bool
	// sqeTail: SQEs filled but not yet published to the kernel.
	sqeTail uint32
}

func at(mem []byte, off uint32) unsafe.Pointer { return unsafe.Pointer(&mem[off]) }

// New sets up a ring with p's flags (and WQFd, SQThreadCPU, SQThreadIdle).
func New(entries uint32, p Params) (*Ring, error) {
	r := &Ring{Params: p}
	fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(&r.Params)), 0)
	if errno != 0 {
		return nil, fmt.Errorf("io_uring_setup: %w", errno)
	}
	r.Fd = int(fd)
	sqSize := int(r.Params.SQOff.Array + r.Params.SQEntries*4)
	cqSize := int(r.Params.CQOff.Cqes + r.Params.CQEntries*uint32(unsafe.Sizeof(CQE{})))
	r.singleMmap = r.Params.Features&featSingleMmap != 0
	if r.singleMmap && cqSize > sqSize {
		sqSize = cqSize
	}
	var err error
	prot, flags := unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE
	if r.sqMem, err = unix.Mmap(r.Fd, offSQRing, sqSize, prot, flags); err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap of the submission ring: %w", err)
	}
	if r.singleMmap {
		r.cqMem = r.sqMem
	} else if r.cqMem, err = unix.Mmap(r.Fd, offCQRing, cqSize, prot, flags); err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap of the completion ring: %w", err)
	}
	sqeSize := int(r.Params.SQEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = unix.Mmap(r.Fd, offSQEs, sqeSize, prot, flags); err != nil {
		r.Close()
		return nil, fmt.Errorf("mmap of the SQE array: %w", err)
	}
	so, co := r.Params.SQOff, r.Params.CQOff
	r.sqHead, r.sqTail, r.sqFlags, r.sqArray = at(r.sqMem, so.Head), at(r.sqMem, so.Tail), at(r.sqMem, so.Flags), at(r.sqMem, so.Array)
	r.sqMask = at(r.sqMem, so.RingMask)
	r.cqHead, r.cqTail, r.cqMask = at(r.cqMem, co.Head), at(r.cqMem, co.Tail), at(r.cqMem, co.RingMask)
	r.cqes = at(r.cqMem, co.Cqes)
	r.sqes = unsafe.Pointer(&r.sqeMem[0])
	r.sqEntries = r.Params.SQEntries
	r.sqeTail = atomic.LoadUint32((*uint32)(r.sqTail))
	return r, nil
}

// Close unmaps the rings and closes the ring's fd.
func (r *Ring) Close() {
	if r.sqeMem != nil {
		_ = unix.Munmap(r.sqeMem)
	}
	if r.cqMem != nil && !r.singleMmap {
		_ = unix.Munmap(r.cqMem)
	}
	if r.sqMem != nil {
		_ = unix.Munmap(r.sqMem)
	}
	r.sqeMem, r.cqMem, r.sqMem = nil, nil, nil
	if r.Fd > 0 {
		_ = unix.Close(r.Fd)
		r.Fd = -1
	}
}

// GetSQE returns a zeroed free SQE, or nil when the submission queue is full
// (the caller submits, or waits for the SQ thread, and asks again).
func (r *Ring) GetSQE() *SQE {
	head := atomic.LoadUint32((*uint32)(r.sqHead))
	if r.sqeTail-head >= r.sqEntries {
		return nil
	}
	idx := r.sqeTail & *(*uint32)(r.sqMask)
	sqe := (*SQE)(unsafe.Add(r.sqes, uintptr(idx)*unsafe.Sizeof(SQE{})))
	*sqe = SQE{}
	*(*uint32)(unsafe.Add(r.sqArray, uintptr(idx)*4)) = idx
	r.sqeTail++
	return sqe
}

// Flush publishes the filled SQEs to the kernel and returns how many are
// waiting to be consumed by it.
func (r *Ring) Flush() uint32 {
	atomic.StoreUint32((*uint32)(r.sqTail), r.sqeTail)
	return r.sqeTail - atomic.LoadUint32((*uint32)(r.sqHead))
}

// NeedsWakeup says whether an idle SQPOLL thread must be woken to see new SQEs.
func (r *Ring) NeedsWakeup() bool {
	return atomic.LoadUint32((*uint32)(r.sqFlags))&sqNeedWakeup != 0
}

// Enter is io_uring_enter(2); EINTR is retried.
func (r *Ring) Enter(toSubmit, minComplete, flags uint32) (int, error) {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_IO_URING_ENTER, uintptr(r.Fd), uintptr(toSubmit),
			uintptr(minComplete), uintptr(flags), 0, 0)
		if errno == unix.EINTR {
			continue
		}
		if errno != 0 {
			return 0, errno
		}
		return int(n), nil
	}
}

// Reap calls fn on every completion the ring holds and marks them seen;
// it returns how many there were.
func (r *Ring) Reap(fn func(CQE)) int {
	head := atomic.LoadUint32((*uint32)(r.cqHead))
	tail := atomic.LoadUint32((*uint32)(r.cqTail))
	mask := *(*uint32)(r.cqMask)
	n := 0
	for ; head != tail; head++ {
		cqe := *(*CQE)(unsafe.Add(r.cqes, uintptr(head&mask)*unsafe.Sizeof(CQE{})))
		n++
		// Release the slot before the callback: it may submit and wait.
		atomic.StoreUint32((*uint32)(r.cqHead), head+1)
		fn(cqe)
	}
	return n
}
