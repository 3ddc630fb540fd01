"""The perftest room: RDMA latency and bandwidth between a node and its
ib.peer."""
