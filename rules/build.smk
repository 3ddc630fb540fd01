# Native programs, built into native/build/ by native/Makefile.
NATIVE_COMMON = [
    "native/Makefile",
    "native/configure.sh",
    "native/common/timing.c",
    "native/common/timing.h",
    "native/common/cli.c",
    "native/common/cli.h",
]
NATIVE_COMMON += ["native/common/lists.c", "native/common/lists.h",
                  "native/common/sockpair.c", "native/common/sockpair.h"]
ECHO_COMMON = ["native/echo/server.c", "native/echo/server.h"]
NATIVE_PROGRAMS = {
    "cost-probe": ["native/probes/cost_probe.c", "native/probes/probe.c", "native/probes/probe.h",
                   "native/probes/syscall_mode.c", "native/probes/sendrecv_mode.c",
                   "native/probes/uring_mode.c"],
    "echo-epoll": ["native/echo/echo_epoll.c", *ECHO_COMMON],
    "echo-uring": ["native/echo/echo_uring.c", *ECHO_COMMON],
    "loadgen": ["native/echo/loadgen.c", *ECHO_COMMON],
    "mpi-probe": ["native/mpi/mpi_probe.c"],
    "mpi-pingpong-ref": ["native/mpi/pingpong_ref.c"],
}
MPI_PROGRAMS = ["mpi-probe", "mpi-pingpong-ref"]


rule build_native:
    input:
        lambda w: NATIVE_COMMON + NATIVE_PROGRAMS[w.program],
    output:
        "native/build/{program}",
    wildcard_constraints:
        program="|".join(NATIVE_PROGRAMS),
    log:
        "results/logs/build/{program}.log",
    conda:
        "../environment.yml"
    params:
        deps=lambda w: "build mpi" if w.program in MPI_PROGRAMS else "build",
        mpicc=config["experiments"].get("mpi", {}).get("mpicc", "mpicc"),
    shell:
        # make decides what is stale; touch so snakemake sees a fresh output.
        "(python -m iolab.deps check {params.deps} && make -C native MPICC={params.mpicc:q}"
        " build/{wildcards.program} && touch {output}) 2>&1 | tee {log}"
