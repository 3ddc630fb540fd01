"""The cost probes' room: every cost-probe mode without a room of its own
(iolab.registry.room_of: syscall, send/recv, io_uring batch and NOP costs,
epoll_wait, ...), read into one tidy table of timed batches."""
