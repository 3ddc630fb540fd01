# The native programs by how each is built (cc, go build, the MPI compiler
# wrapper), then the one table of which files make each. The Makefile
# includes it; rules/build.smk and the measurement run keys
# (iolab/runplan.py) read it through iolab/native.py. Headers are listed so
# that editing one rebuilds, and re-measures into a new run key.
C_PROGRAM_NAMES := cost-probe echo-epoll echo-uring loadgen
GO_PROGRAM_NAMES := echo-go-net echo-go-uring
MPI_PROGRAM_NAMES := mpi-probe mpi-pingpong-ref
COMMON_SRCS := common/timing.c common/timing.h common/cli.c common/cli.h common/lists.c \
	common/lists.h common/sockpair.c common/sockpair.h
ECHO_SRCS := echo/server.c echo/server.h
# One io_uring setup from ring flags or a preset, for every program that sets up a ring.
RING_SRCS := common/ring_setup.c common/ring_setup.h
# The raw-data writer, for every program that records measurements to a file.
RAW_SRCS := common/raw_out.c common/raw_out.h
# cost-probe's modes: every probes/*_mode.c, each registering itself (PROBE_MODE).
PROBE_MODES := $(sort $(wildcard probes/*_mode.c))
cost-probe_SRCS := probes/cost_probe.c probes/probe.c probes/probe.h $(PROBE_MODES) common/uring_compat.h \
	$(RING_SRCS) $(RAW_SRCS) $(COMMON_SRCS)
echo-epoll_SRCS := echo/echo_epoll.c common/uring_compat.h $(ECHO_SRCS) $(COMMON_SRCS)
echo-uring_SRCS := echo/echo_uring.c echo/echo_uring.h echo/uring_loop.c echo/uring_conn.c echo/uring_send.c echo/uring_options.c \
	echo/uring_buffers.c common/uring_compat.h $(RING_SRCS) $(ECHO_SRCS) $(COMMON_SRCS)
loadgen_SRCS := echo/loadgen.c echo/loadgen_core.c echo/loadgen_epoll.c echo/loadgen_uring.c \
	echo/loadgen_blocking.c echo/loadgen.h $(RAW_SRCS) $(ECHO_SRCS) $(COMMON_SRCS)
# The Go servers (native/go, a Go module): built with `go build`, not cc.
GO_SRCS := go/go.mod go/go.sum go/internal/serve/serve.go go/internal/uring/uring.go
echo-go-net_SRCS := go/cmd/echo-go-net/main.go $(GO_SRCS)
echo-go-uring_SRCS := go/cmd/echo-go-uring/main.go $(GO_SRCS)
mpi-probe_SRCS := mpi/mpi_probe.c mpi/mpi_probe.h mpi/mpi_ops.c mpi/mpi_sync.c mpi/mpi_meta.c \
	mpi/mpi_osu.c $(RAW_SRCS) common/timing.c common/timing.h common/cli.c common/cli.h \
	common/lists.c common/lists.h
mpi-pingpong-ref_SRCS := mpi/pingpong_ref.c common/cli.c common/cli.h common/lists.c common/lists.h
