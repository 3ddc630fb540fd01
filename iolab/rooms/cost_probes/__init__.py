"""The cost probes' room: syscall, send/recv, io_uring batch and NOP costs
(cost-probe's plain modes), read into one tidy table of timed batches."""
