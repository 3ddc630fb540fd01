# Loads and validates the configuration; defines the names other rules use.
import json
import sys
import zlib

from snakemake.exceptions import WorkflowError
from snakemake.utils import validate

sys.path.insert(0, workflow.basedir)  # iolab/ without an installed package
from iolab.config import (  # noqa: E402
    ConfigError,
    check_semantics,
    describe_validation_error,
    find_validation_error,
)


def fail_config(message):
    # One line, then stop: a traceback would bury the key that is wrong.
    print(message, file=sys.stderr)
    sys.exit(1)


try:
    validate(config, "../config/schema.yaml")
    check_semantics(config)
except WorkflowError as e:
    err = find_validation_error(e)
    fail_config(describe_validation_error(err) if err is not None else f"config error: {e}")
except ConfigError as e:
    fail_config(str(e))

NODES = [n["name"] for n in config["nodes"]]
NODE_BY_NAME = {n["name"]: n for n in config["nodes"]}
REPS = list(range(1, config["repeats"] + 1))
EXPERIMENTS = [name for name, section in config["experiments"].items() if section["enabled"]]

# Python modules the analysis steps run; editing one re-runs the analysis,
# never a measurement.
ANALYSIS_CODE = [
    "iolab/tables.py",
    "iolab/stats.py",
    "iolab/plotting.py",
    "iolab/outputs.py",
]


wildcard_constraints:
    node="|".join(NODES),
    rep=r"\d+",


def run_seed(experiment, node, rep):
    """A per-run seed derived from the config seed, stable across runs."""
    return (config["seed"] + zlib.crc32(f"{experiment}/{node}/{rep}".encode())) % 2**31


def raw_files(experiment):
    return expand("data/raw/{node}/{experiment}/rep{rep}.csv",
                  node=NODES, experiment=experiment, rep=REPS)
