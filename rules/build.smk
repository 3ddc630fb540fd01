# Native programs, built into native/build/ by native/Makefile; which files
# make each program is native/programs.mk (NATIVE_PROGRAMS, rules/common.smk).


rule build_native:
    input:
        lambda w: BUILD_FILES + NATIVE_PROGRAMS[w.program],
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
        mpicc=MPICC,
    shell:
        # make decides what is stale; touch so snakemake sees a fresh output.
        "(python -m iolab.deps check {params.deps} && make -C native MPICC={params.mpicc:q}"
        " build/{wildcards.program} && touch {output}) > {log} 2>&1"
