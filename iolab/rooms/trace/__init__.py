"""The bpftrace room: kernel-side syscall durations under the echo and
probe workloads."""
