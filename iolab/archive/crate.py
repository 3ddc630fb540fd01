"""A run's archive: a Provenance Run Crate (RO-Crate's Workflow Run profiles)
of the workflow, every raw file the run's tables read with its provenance
sidecar, the tables, notebooks, numbers, figures and paper, the software
environment and the claims' verdicts as data; and the check of a crate's
checksums.

    python -m iolab.archive.crate build [--out archive]        (./repro archive)
    python -m iolab.archive.crate verify CRATE.zip             (./repro verify)
    python -m iolab.archive.crate figure-ids CRATE.zip         (each figure's identity, as the paper prints it)
    python -m iolab.archive.crate zenodo [--check]             (.zenodo.json from CITATION.cff)

The crate is built with ro-crate-py. Each measurement job is a CreateAction
(its raw file and sidecar the result, its start and end from the sidecar),
run by the workflow step of its experiment (a HowToStep under a
ControlAction); the notebooks and the paper likewise; Snakemake's run is the
OrganizeAction over them. Every file carries its SHA-256, which ``verify``
checks against the bytes in the zip.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .. import paths
from ..provenance import git_state
from ..readers import sha256
from ..registry import EXPERIMENTS, NOTEBOOKS, extra_output_paths
from .contents import citation, code, environment, measured_raw, package_version, verdicts, zenodo_metadata
from .untrusted import DEFAULT_MAX_BYTES, Crate, CrateError, verify

PROFILES = {
    "https://w3id.org/ro/wfrun/process/0.5": "Process Run Crate",
    "https://w3id.org/ro/wfrun/workflow/0.5": "Workflow Run Crate",
    "https://w3id.org/ro/wfrun/provenance/0.5": "Provenance Run Crate",
    "https://w3id.org/workflowhub/workflow-ro-crate/1.0": "Workflow RO-Crate",
}
RULE_FILES = ("rules/*.smk",)
CONFIG_FILES = ("config/*.yaml", "config/overlays/*.yaml", "profiles/*/config*.yaml")
# Data the analysis read besides the raw files: the between-run spread.
DATA_INPUTS = ("data/occasions.json",)
OUTPUT_FILES = (
    "results/tables/*.parquet",
    "results/tables/*.sources.json",
    "results/numbers/*.json",
    "results/notebooks/*.ipynb",
    "results/nodes.json",
    # What the run took (Snakemake's benchmark files): the paper's artifact
    # appendix reads them, and a re-analysis unpacks them to say the same.
    "results/benchmarks/measure/**/*.tsv",
    "results/benchmarks/notebooks/*.tsv",
    "paper/figures/*.svg",
    "paper/figures/*.pdf",
    "paper/figures/manifest.json",
    "paper/generated/numbers.json",
    "paper/paper.pdf",
)
ENVIRONMENT_FILES = ("requirements.lock", "pyproject.toml", "native/build/build-info.json")


def _glob(root: Path, patterns: Iterable[str]) -> list[Path]:
    return sorted({p for pattern in patterns for p in root.glob(pattern) if p.is_file()})


def build(root: Path, out_dir: Path, overlay: str = "") -> Path:
    """Write ``out_dir/iolab-<commit>-<date>.crate.zip``; returns its path."""
    from rocrate.model.contextentity import ContextEntity
    from rocrate.rocrate import ROCrate

    raw = measured_raw(root)
    git = git_state(root)
    commit, dirty = git["commit"] or "unknown", bool(git["dirty"])
    now = datetime.now(UTC).replace(microsecond=0)
    cff = citation(root)
    # RO-Crate 1.1: the version the Workflow Run Crate profiles (0.5) build on.
    crate = ROCrate(version="1.1")
    # The Workflow Run Crate term for a file's checksum, which 1.1's context lacks.
    crate.metadata.extra_terms["sha256"] = "https://w3id.org/ro/terms/workflow-run#sha256"
    crate.name = f"iolab run at {commit[:12]}{' (uncommitted changes)' if dirty else ''}, {now:%Y-%m-%d}"
    crate.description = (
        f"{cff['title']}: one run of the workflow, with every raw measurement the paper's "
        "figures rest on, their provenance, the tables, notebooks, numbers, figures and paper."
    )
    licence = f"https://spdx.org/licenses/{cff.get('license', 'MIT')}"
    crate.license = crate.add(
        ContextEntity(
            crate,
            licence,
            properties={"@type": "CreativeWork", "name": f"{cff.get('license', 'MIT')} License", "identifier": licence},
        )
    )
    crate.root_dataset["datePublished"] = now.isoformat()
    crate.root_dataset["version"] = commit
    authors = [
        crate.add(ContextEntity(crate, f"#author-{i}", properties={"@type": "Person", "name": a.get("name")}))
        for i, a in enumerate(cff.get("authors", []))
    ]
    crate.root_dataset["author"] = authors
    crate.root_dataset["conformsTo"] = [
        crate.add(
            ContextEntity(
                crate, uri, properties={"@type": "CreativeWork", "name": name, "version": uri.rsplit("/", 1)[-1]}
            )
        )
        for uri, name in PROFILES.items()
    ]

    def add_file(path: Path, **props: Any) -> Any:
        rel = path.relative_to(root).as_posix()
        return crate.add_file(
            path, rel, properties={"sha256": sha256(path), "contentSize": path.stat().st_size, **props}
        )

    # A workflow with steps is also a HowTo (Provenance Run Crate).
    workflow = crate.add_workflow(
        root / "Snakefile",
        "Snakefile",
        main=True,
        lang="snakemake",
        properties={
            "@type": ["File", "SoftwareSourceCode", "ComputationalWorkflow", "HowTo"],
            "sha256": sha256(root / "Snakefile"),
            "contentSize": (root / "Snakefile").stat().st_size,
            "name": "iolab workflow",
        },
    )
    # The rule files are the workflow's source; the configs are what it ran on.
    rule_files = [add_file(p, **{"@type": ["File", "SoftwareSourceCode"]}) for p in _glob(root, RULE_FILES)]
    config_files = [add_file(p, encodingFormat="application/yaml") for p in _glob(root, CONFIG_FILES)]
    data_inputs = [add_file(p, encodingFormat="application/json") for p in _glob(root, DATA_INPUTS)]
    # What this run read: the base config, the nodes and the overlay it named.
    run_config = [
        f
        for f in config_files
        if f.id in ("config/config.yaml", "config/nodes.yaml")
        or (overlay and f.id == f"config/overlays/{overlay}.yaml")
    ]
    engine = crate.add(
        ContextEntity(
            crate,
            "#snakemake",
            properties={
                "@type": "SoftwareApplication",
                "name": "Snakemake",
                "url": "https://snakemake.github.io",
                "softwareVersion": package_version("snakemake"),
            },
        )
    )

    steps: dict[str, Any] = {}

    def step(name: str, tool: str) -> Any:
        if name not in steps:
            # iolab's own code at this commit; papermill and typst at their installed versions.
            app = crate.add(
                ContextEntity(
                    crate,
                    f"#tool-{name}",
                    properties={
                        "@type": "SoftwareApplication",
                        "name": tool,
                        "softwareVersion": package_version(tool) if tool in ("papermill", "typst") else commit,
                    },
                )
            )
            steps[name] = crate.add(
                ContextEntity(
                    crate,
                    f"#step-{name}",
                    properties={"@type": "HowToStep", "name": name, "position": str(len(steps)), "workExample": app},
                )
            )
        return steps[name]

    actions: list[ContextEntity] = []
    control: list[ContextEntity] = []

    def run_action(
        name: str,
        tool: str,
        ident: str,
        objects: list[Any],
        results: list[Any],
        start: str | None = None,
        end: str | None = None,
    ) -> None:
        how = step(name, tool)
        props: dict[str, Any] = {
            "@type": "CreateAction",
            "name": f"{name}: {ident}",
            "description": f"the workflow step {name} run on {ident}",
            "instrument": how["workExample"],
            "object": objects,
            "result": results,
            "actionStatus": "http://schema.org/CompletedActionStatus",
        }
        if start:
            props["startTime"] = start
        if end:
            props["endTime"] = end
        action = crate.add(ContextEntity(crate, f"#run-{name}-{len(actions)}", properties=props))
        actions.append(action)
        control.append(
            crate.add(
                ContextEntity(
                    crate,
                    f"#control-{len(control)}",
                    properties={
                        "@type": "ControlAction",
                        "name": f"orchestrate {name}",
                        "instrument": how,
                        "object": action,
                    },
                )
            )
        )

    raw_entities: dict[str, Any] = {}
    for entry in raw:
        raw_path = root / entry["raw"]
        side_path = root / entry["provenance"]
        side = json.loads(side_path.read_text())
        data = add_file(
            raw_path,
            encodingFormat="text/csv",
            description=f"{entry['experiment']} raw measurement, {side['node']['name']}",
        )
        if data["sha256"] != entry["sha256"]:
            raise CrateError(
                f"{entry['raw']}: its bytes no longer match the checksum its table recorded; "
                "re-run the table (`./repro all`) before archiving"
            )
        sidecar = add_file(side_path, encodingFormat="application/json", description="provenance sidecar")
        extras = [add_file(p) for p in extra_output_paths(entry["experiment"], raw_path) if p.exists()]
        raw_entities[entry["raw"]] = data
        run_action(
            f"measure_{entry['experiment']}",
            EXPERIMENTS[entry["experiment"]].run_module if entry["experiment"] in EXPERIMENTS else entry["experiment"],
            entry["raw"],
            run_config,
            [data, sidecar, *extras],
            side.get("started"),
            side.get("finished"),
        )

    outputs = {p.relative_to(root).as_posix(): add_file(p) for p in _glob(root, OUTPUT_FILES)}
    for table in sorted(k for k in outputs if k.endswith(".parquet")):
        experiment = Path(table).stem
        run_action(
            "tidy_table",
            "iolab.tables",
            experiment,
            [e for k, e in raw_entities.items() if f"/{experiment}/" in k],
            [outputs[table], outputs.get(f"results/tables/{experiment}.sources.json")],
        )
    for name, nb in NOTEBOOKS.items():
        executed = outputs.get(f"results/notebooks/{name}.ipynb")
        if executed is None:
            continue
        source = add_file(root / "notebooks" / f"{name}.ipynb")
        figures = [
            outputs[k]
            for f in nb.figures
            for k in (f"paper/figures/{f.name}.svg", f"paper/figures/{f.name}.pdf")
            if k in outputs
        ]
        run_action(
            f"notebook_{name}",
            "papermill",
            name,
            [source, *[outputs[k] for k in (f"results/tables/{t}.parquet" for t in nb.tables) if k in outputs]],
            [executed, *figures, *[outputs[k] for k in (f"results/numbers/{name}.json",) if k in outputs]],
        )
    if "paper/paper.pdf" in outputs:
        run_action(
            "paper",
            "typst",
            "paper/paper.pdf",
            [
                add_file(root / "paper" / "paper.typ"),
                *[outputs[k] for k in ("paper/generated/numbers.json", "paper/figures/manifest.json") if k in outputs],
            ],
            [outputs["paper/paper.pdf"]],
        )

    env_files = [add_file(p) for p in _glob(root, ENVIRONMENT_FILES)]
    with tempfile.TemporaryDirectory() as scratch:
        generated = Path(scratch)
        (generated / "environment.json").write_text(json.dumps(environment(root, raw), indent=1, sort_keys=True))
        (generated / "verdicts.json").write_text(json.dumps(verdicts(root), indent=1))
        (generated / "code.json").write_text(json.dumps(code(root, raw), indent=1, sort_keys=True))
        for name, what in (
            ("environment.json", "software and nodes of this run"),
            ("code.json", "digests of the code that measured each experiment and of the analysis"),
            ("verdicts.json", "each claim part's value, interval, rule, margin and outcome"),
        ):
            crate.add_file(
                generated / name,
                f"archive/{name}",
                properties={
                    "sha256": sha256(generated / name),
                    "contentSize": (generated / name).stat().st_size,
                    "encodingFormat": "application/json",
                    "description": what,
                },
            )
        run_result = [outputs[k] for k in ("paper/paper.pdf", "paper/figures/manifest.json") if k in outputs]
        main_run = crate.add(
            ContextEntity(
                crate,
                "#run",
                properties={
                    "@type": "CreateAction",
                    "name": crate.name,
                    "instrument": workflow,
                    "object": [*run_config, *data_inputs],
                    "result": run_result,
                    "endTime": now.isoformat(),
                    "description": f"overlay {overlay or 'default'}; environment: {', '.join(e.id for e in env_files)}",
                },
            )
        )
        crate.root_dataset["mentions"] = [main_run, *actions]
        crate.add(
            ContextEntity(
                crate,
                "#orchestrate",
                properties={
                    "@type": "OrganizeAction",
                    "name": "Snakemake's run of the workflow",
                    "instrument": engine,
                    "object": control,
                    "result": main_run,
                },
            )
        )
        workflow["step"] = list(steps.values())
        # A workflow with steps lists the tools it orchestrates.
        # (The profile wants every part of a workflow to be a tool some action
        # ran; the rule files are parts of the crate, named by the workflow's
        # "isBasedOn".)
        workflow["hasPart"] = [s["workExample"] for s in steps.values()]
        workflow["isBasedOn"] = rule_files
        out_dir.mkdir(parents=True, exist_ok=True)
        target = out_dir / f"iolab-{commit[:12]}-{now:%Y%m%d}.crate.zip"
        # Written beside, then renamed: an interrupted build leaves no crate.
        partial = out_dir / f".{target.name}.partial.zip"
        crate.write_zip(str(partial))
        partial.replace(target)
    return target


def figure_ids(crate_zip: Path) -> list[tuple[str, str, bool]]:
    """Per figure of the crate's manifest: its identity recomputed from the
    crate's own file entities (paper.figure_id), and whether it equals the
    one the manifest (and so the paper's appendix) printed."""
    from ..report.paper import figure_id

    with Crate(crate_zip) as crate:
        if crate.problems:
            raise CrateError(
                f"{crate_zip}: {len(crate.problems)} problem(s), first: {crate.problems[0]}; see ./repro verify"
            )
        entities = crate.entities
        manifest = crate.read_json("paper/figures/manifest.json")
    rows = []
    try:
        for name, fig in sorted(manifest["figures"].items()):
            raw = [{"raw": r["raw"], "sha256": entities.get(r["raw"], {}).get("sha256", "missing")} for r in fig["raw"]]
            ident = figure_id(str(name), raw)
            rows.append((str(name), ident, ident == fig.get("id")))
    except (KeyError, TypeError, AttributeError) as e:
        raise CrateError(f"{crate_zip}: paper/figures/manifest.json is not a figure manifest ({e!r})") from e
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m iolab.archive.crate", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="archive this checkout's latest run as a Provenance Run Crate zip")
    b.add_argument("--out", type=Path, default=paths.REPO / "archive", help="directory for the zip (default archive/)")
    b.add_argument("--overlay", default="", help="the config overlay the run used (recorded)")
    v = sub.add_parser(
        "verify",
        help="check that every member of a crate is a plain file its metadata lists, "
        "and that each matches its recorded SHA-256 and size",
    )
    v.add_argument("crate", type=Path)
    v.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help=f"the most the crate may expand to (default {DEFAULT_MAX_BYTES})",
    )
    f = sub.add_parser("figure-ids", help="each figure's identity, recomputed from a crate's files")
    f.add_argument("crate", type=Path)
    z = sub.add_parser("zenodo", help="write .zenodo.json from CITATION.cff")
    z.add_argument("--check", action="store_true", help="only check that .zenodo.json is up to date")
    args = ap.parse_args(argv)
    try:
        if args.command == "build":
            started = datetime.now()
            target = build(paths.REPO, args.out, args.overlay)
            size = target.stat().st_size / 1e6
            print(
                f"wrote {paths.relative(target)}: {size:.1f} MB in {(datetime.now() - started).seconds} s; "
                f"check it with ./repro verify {paths.relative(target)}"
            )
            from . import store

            added = store.add(store.DEFAULT_STORE, target)
            said = "added it to" if added == store.ADDED else f"{added}: not added again to"
            print(f"{said} the store of runs, {paths.relative(store.DEFAULT_STORE)} (./repro store list)")
            from . import recording

            record = recording.of_crate(target, args.overlay or "default").write()
            print(
                f"wrote its record, {paths.relative(record)} ({record.stat().st_size / 1000:.1f} kB): the verdicts "
                "about this machine kind pool it (./repro verdicts); commit it to keep the evidence"
            )
        elif args.command == "verify":
            problems, files = verify(args.crate, args.max_bytes)
            for p in problems:
                print(p, file=sys.stderr)
            if problems:
                print(f"{args.crate}: {len(problems)} problem(s); do not use this crate", file=sys.stderr)
                return 1
            print(
                f"{args.crate}: each of its {files} files is listed in its metadata and matches its recorded "
                "SHA-256 and size; no other member"
            )
        elif args.command == "figure-ids":
            rows = figure_ids(args.crate)
            for name, ident, same in rows:
                print(f"{name:28} {ident}  {'matches the paper' if same else 'DIFFERS from the paper'}")
            return 0 if all(same for _, _, same in rows) else 1
        else:
            text = json.dumps(zenodo_metadata(paths.REPO), indent=2) + "\n"
            target = paths.REPO / ".zenodo.json"
            if args.check:
                if not target.exists() or target.read_text() != text:
                    print(
                        ".zenodo.json is not what CITATION.cff gives: run python -m iolab.archive.crate zenodo",
                        file=sys.stderr,
                    )
                    return 1
                print(".zenodo.json matches CITATION.cff")
            else:
                target.write_text(text)
                print("wrote .zenodo.json")
    except CrateError as e:
        print(f"crate: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
