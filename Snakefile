# iolab workflow. Data flows one way; each arrow is a rule file:
#   config (common.smk) -> native build (build.smk) -> measurements into
#   data/raw/<node>/<experiment>/ (probes.smk) -> [adaptive precision: more
#   rounds of what decides undecided verdicts (precision.smk)] -> tidy tables (tables.smk)
#   -> notebooks: fits and figures (notebooks.smk) -> paper (paper.smk)
#   -> on request, the run's archive (archive.smk: `snakemake archive`)
#   -> on request, a cluster study: each node one occasion, verdicts pooled
#      over the nodes (study.smk: `snakemake study`)
import sys
from pathlib import Path

# It runs in iolab's environment (./repro setup makes it): anywhere else it
# stops here, before anything is planned, with one line naming that command.
sys.path.insert(0, workflow.basedir)  # iolab/ without an installed package
from iolab.environment import stop_unless_ready  # noqa: E402  (the standard library only)

stop_unless_ready()

from snakemake.utils import min_version  # noqa: E402

min_version("9.0")

# A run, however Snakemake was started, refuses to start beside another
# Snakemake or a measurement still working in this checkout, and removes the
# lock a killed run left (iolab.live.before_run). Dry runs and the Snakemake
# processes of jobs (cluster executors) skip it.
if workflow.is_main_process and not getattr(workflow.output_settings, "dryrun", False):
    from iolab.live import before_run

    refusal = before_run(Path(workflow.basedir))
    if refusal:
        print(refusal, file=sys.stderr)
        sys.exit(1)


configfile: "config/config.yaml"
configfile: "config/nodes.yaml"


include: "rules/common.smk"
include: "rules/build.smk"
include: "rules/probes.smk"
include: "rules/precision.smk"
include: "rules/tables.smk"
include: "rules/notebooks.smk"
include: "rules/paper.smk"
include: "rules/archive.smk"
include: "rules/study.smk"


localrules: all


rule all:
    default_target: True
    input:
        "paper/paper.pdf",
        "paper/figures/manifest.json",
        "results/nodes.json",
        expand("results/notebooks/{notebook}.ipynb", notebook=NOTEBOOKS_ON),
