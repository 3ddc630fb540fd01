"""Bad configuration stops the run with one line naming the key.

Each bad value is checked in-process against the schema and the semantic
checks (iolab.config, what rules/common.smk calls); one real snakemake run
proves the wiring: the workflow stops with that one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import REPO, snakemake

from iolab import config as iolab_config

# (overlay, text the one-line error must contain)
BAD_CONFIGS = [
    ({"repeats": 0}, "config error at repeats: 0 is less than the minimum of 1"),
    ({"sede": 1}, "config error at (top level): Additional properties are not allowed ('sede'"),
    (
        {"experiments": {"syscall": {"batches": "many"}}},
        "config error at experiments.syscall.batches: 'many' should be of type integer",
    ),
    ({"nodes": [{"name": "local", "runner": "teleport"}]}, "config error at nodes[0].runner: 'teleport' is not one of"),
    (
        {"nodes": [{"name": "local", "runner": "local", "kind": "hypervisor"}]},
        "config error at nodes[0].kind: 'hypervisor' is not one of",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local"}, {"name": "a", "runner": "local"}]},
        "config error at nodes: node name 'a' is used more than once",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"probe": 4096}}]},
        "config error at nodes[0].cpus.probe: CPU 4096 does not exist on this machine",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"server": "0-4095"}}]},
        "config error at nodes[0].cpus.server: CPU 4095 does not exist on this machine",
    ),
    (
        {"nodes": [{"name": "local", "runner": "local", "cpus": {"server": "0-"}}]},
        "config error at nodes[0].cpus.server: '0-' is not allowed here: CPU, or CPU list",
    ),
    (
        {"experiments": {"syscall": {"variants": ["getppid", "fork"]}}},
        "config error at experiments.syscall.variants[1]: 'fork' is not one of",
    ),
    (
        {"nodes": [{"name": "../etc", "runner": "local"}]},
        "config error at nodes[0].name: '../etc' is not allowed here: Node name (letters",
    ),
    (
        {"experiments": {"uring_batch": {"presets": ["sqpoll"]}}},
        "config error at experiments.uring_batch.presets: must include 'default'",
    ),
    ({"experiments": {"uring_batch": {"n": [2, 4]}}}, "config error at experiments.uring_batch.n: must include 1"),
    (
        {"experiments": {"sendrecv": {"ack_modes": ["sometimes"]}}},
        "config error at experiments.sendrecv.ack_modes[0]: 'sometimes' is not one of",
    ),
    (
        {"experiments": {"echo": {"only": ["epoll", "turbo"]}}},
        "config error at experiments.echo.only: 'turbo' is not a preset",
    ),
    (
        {"experiments": {"echo": {"preset_groups": {"fast": ["epoll", "turbo"]}}}},
        "config error at experiments.echo.preset_groups.fast: 'turbo' is neither a preset nor a group declared above",
    ),
    (
        {"experiments": {"echo": {"preset_groups": {"sqpoll": ["epoll", "default"]}}}},
        "config error at experiments.echo.preset_groups.sqpoll: 'sqpoll' is also a preset",
    ),
    (
        {"experiments": {"echo": {"presets": {"fast": ["--sqpoll", "--nope"]}}}},
        "config error at experiments.echo.presets.fast: '--nope' is not a flag of echo-uring",
    ),
    (
        {"experiments": {"echo": {"presets": {"aff": ["--sqpoll", "--sq-aff", "{spare}"]}}}},
        "config error at experiments.echo.presets.aff: '{spare}': the only placeholders are {spare_cpu} and "
        "{spare_cpus}",
    ),
    (
        {"experiments": {"echo": {"presets": {"epoll": ["--sqpoll"]}}}},
        "config error at experiments.echo.presets.epoll: '--sqpoll' is not a flag of echo-epoll",
    ),
    (
        {"experiments": {"echo": {"presets": {"g": {"server": "go-uring", "flags": ["--rings", "2", "--nope"]}}}}},
        "config error at experiments.echo.presets.g: '--nope' is not a flag of echo-go-uring",
    ),
    (
        {"experiments": {"echo": {"presets": {"g": {"server": "go-fast"}}}}},
        "config error at experiments.echo.presets.g.server: 'go-fast' is not one of",
    ),
    (
        {"experiments": {"echo": {"presets": {"x": ["rm -rf /"]}}}},
        "config error at experiments.echo.presets.x[0]: 'rm -rf /' does not match",
    ),
    (
        {"experiments": {"uring_batch": {"max_not_inline": 2}}},
        "config error at experiments.uring_batch.max_not_inline: 2 is greater than the maximum of 1",
    ),
    # YAML's .nan passes JSON Schema's minimum and maximum (NaN compares false both ways).
    (
        {"experiments": {"uring_batch": {"max_not_inline": float("nan")}}},
        "config error at experiments.uring_batch.max_not_inline: nan is not a finite number",
    ),
    (
        {"nodes": [{"name": "far", "runner": "ssh"}]},
        "config error at nodes[0].host: node 'far' uses the ssh runner and needs a host",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "echo_client": "b"}]},
        "config error at nodes[0].echo_client: 'b' is not a node in the inventory",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "experiments": ["mpi", "teleport"]}]},
        "config error at nodes[0].experiments: 'teleport' is not an experiment",
    ),
    (
        {"nodes": [{"name": "a", "runner": "vm", "vm": {"accel": "hvf"}}]},
        "config error at nodes[0].vm.accel: 'hvf' is not one of",
    ),
    (
        {"experiments": {"mpi": {"transports": ["shm", "infiniband"]}}},
        "config error at experiments.mpi.transports[1]: 'infiniband' is not one of",
    ),
    (
        {"experiments": {"mpi": {"ranks": [4, 8]}}},
        "config error at experiments.mpi.ranks: ping-pong runs in the 2-rank launch",
    ),
    (
        {"experiments": {"mpi": {"algorithms": {"bcast": "telepathy"}}}},
        "config error at experiments.mpi.algorithms.bcast: 'telepathy' is not one of",
    ),
    (
        {"experiments": {"mpi": {"algorithms": None, "selections": ["pinned", "default"]}}},
        "config error at experiments.mpi.selections: pinned and default would run the same algorithms",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "thread-per-connection", "layout": "shared"}], "pipeline": 4}}},
        "config error at experiments.echo.setups[0]: the thread-per-connection client is closed-loop ping-pong",
    ),
    (
        {
            "experiments": {
                "echo": {
                    "setups": [
                        {"client": "event-loop", "layout": "pinned", "pipeline": 8},
                        {"client": "thread-per-connection", "layout": "shared", "pipeline": 8},
                    ]
                }
            }
        },
        "config error at experiments.echo.setups[1]: the thread-per-connection client is closed-loop ping-pong",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "event-loop", "layout": "shared", "only": ["go_nett"]}]}}},
        "config error at experiments.echo.setups[0].only: 'go_nett' is not a preset",
    ),
    (
        {"experiments": {"echo": {"setups": [{"client": "event-loop", "layout": "spread"}]}}},
        "config error at experiments.echo.setups[0].layout: 'spread' is not one of",
    ),
    (
        {"experiments": {"mpi": {"selections": ["tuned"]}}},
        "config error at experiments.mpi.selections[0]: 'tuned' is not one of",
    ),
    (
        # The overlays come from config/overlays/ (one list, not two).
        {"overlay": "nightly"},
        "config error at overlay: 'nightly' is not one of "
        + str(["default", *sorted(p.stem for p in (REPO / "config" / "overlays").glob("*.yaml"))]),
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "address": "10.0.0.1", "mpi": {"peers": ["b"]}}]},
        "config error at nodes[0].mpi.peers: 'b' is not a node in the inventory",
    ),
    (
        {
            "nodes": [
                {"name": "a", "runner": "local", "address": "10.0.0.1", "mpi": {"peers": ["b"]}},
                {"name": "b", "runner": "local"},
            ]
        },
        "config error at nodes[0].mpi.peers: 'b' is a local node; MPI peers are ssh nodes",
    ),
    (
        {
            "nodes": [
                {"name": "a", "runner": "local", "mpi": {"peers": ["b"]}},
                {"name": "b", "runner": "ssh", "host": "b.example.org"},
            ]
        },
        "config error at nodes[0].address: node 'a' has MPI peers, which reach it by its address",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "mpi": {"transports": ["shm", "nodes"]}}]},
        "config error at nodes[0].mpi.transports: nodes runs across this node's mpi.peers; set them",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "ib": {"peer": "b"}}]},
        "config error at nodes[0].ib.peer: 'b' is not a node in the inventory",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "ib": {"peer": "b"}}, {"name": "b", "runner": "local"}]},
        "config error at nodes[0].ib.peer: perftest runs between a local or ssh node and an ssh peer",
    ),
    (
        {"experiments": {"ib": {"iterations": 1}}},
        "config error at experiments.ib.iterations: 1 is less than the minimum of 5",
    ),
    (
        {"experiments": {"mpi": {"methods": ["probe", "imb"]}}},
        "config error at experiments.mpi.methods[1]: 'imb' is not one of",
    ),
    (
        {"experiments": {"mpi": {"methods": ["osu"]}}},
        "config error at experiments.mpi.methods: the models, figures and claims use mpi-probe's own timing",
    ),
    # An ssh field never changes meaning by its spelling: no option, no new line.
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "-oProxyCommand=touch /tmp/x"}]},
        "config error at nodes[0].host: '-oProxyCommand=touch /tmp/x' is not allowed here: ssh: host name",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "user": "bob\nHost *"}]},
        "config error at nodes[0].user: 'bob\\nHost *' is not allowed here: ssh: login user",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "identity_file": "k\n  ProxyCommand x"}]},
        "config error at nodes[0].identity_file: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a", "known_hosts": "-x"}]},
        "config error at nodes[0].known_hosts: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "local", "address": "10.0.0.1 slots=99\nevil"}]},
        "config error at nodes[0].address: ",
    ),
    (
        {"nodes": [{"name": "a", "runner": "ssh", "host": "a.example.org", "mpi": {"transports": ["netns"]}}]},
        "config error at nodes[0].mpi.transports: netns needs the network namespaces of the machine",
    ),
]

# Lines snakemake itself prints before the workflow is even parsed.
PREAMBLE = (
    "Using workflow specific profile",
    "Config file config/config.yaml is extended",
    "Config file config/nodes.yaml is extended",
)


@pytest.mark.parametrize("overlay,expected", BAD_CONFIGS, ids=[e.split(":")[0][16:] or "top" for _, e in BAD_CONFIGS])
def test_bad_config_gives_one_line(tmp_path: Path, overlay: dict, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(overlay))
    with pytest.raises(iolab_config.ConfigError) as info:
        iolab_config.load(bad)
    message = str(info.value)
    assert "\n" not in message and expected in message, message


# Nine levels of nine aliases: 9**9 (387 million) strings to any walk over it.
ALIAS_BOMB = "lol0: &a0 [lol]\n" + "".join(f"lol{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))


@pytest.mark.parametrize(
    "data,expected",
    [
        (ALIAS_BOMB.encode(), "bad.yaml: an anchor (&a0) at line 1, column 7: iolab's configs do not use YAML anchors"),
        (b"seed: *x\n", "bad.yaml: an alias (*x) at line 1, column 7: iolab's configs do not use YAML anchors"),
        (b"\x89PNG\r\n\x1a\n\x00\x00", "bad.yaml: not a YAML text file (byte 0x89 at offset 0 is not UTF-8)"),
        (b"seed: 1\x00\n", "bad.yaml: not a YAML text file (control character '\\x00' on line 1)"),
        (b"seed: !!python/object/apply:os.system [id]\n", "bad.yaml: could not determine a constructor for the tag"),
        (b"- a list\n", "bad.yaml: a config file is a mapping of keys, not a list"),
    ],
    ids=["alias bomb", "alias", "binary", "NUL", "python tag", "list"],
)
def test_a_config_file_iolab_will_not_read_is_one_line(tmp_path: Path, data: bytes, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(data)
    with pytest.raises(iolab_config.ConfigError) as info:
        iolab_config.load(bad)
    message = str(info.value)
    assert "\n" not in message and message.startswith("config error in ") and expected in message, message


def test_the_alias_bomb_is_one_a_plain_loader_takes() -> None:
    # The negative control: PyYAML's own safe loader takes the bomb as data,
    # a structure of 9**9 paths that any walk over the config would follow.
    loaded = yaml.safe_load(ALIAS_BOMB)
    node, paths = loaded["lol9"], 1
    while isinstance(node, list) and isinstance(node[0], list):
        paths, node = paths * len(node), node[0]
    assert paths * len(node) == 9**9 and loaded["lol9"][0] is loaded["lol9"][1]


def test_an_exponent_without_a_dot_is_a_number(tmp_path: Path) -> None:
    """YAML 1.2 reads 1e-9 as a float; PyYAML's YAML 1.1 rules need a dot
    and a signed exponent, and read it as a string that the schema then
    refuses. The config's loader reads it as a number."""
    overlay = tmp_path / "small.yaml"
    overlay.write_text("experiments:\n  echo:\n    duration: 1e-9\n    warmup: 1E-2\n  syscall:\n    batches: 2000\n")
    echo = iolab_config.load(overlay)["experiments"]["echo"]
    assert (echo["duration"], echo["warmup"]) == (1e-9, 0.01) and isinstance(echo["duration"], float)
    assert iolab_config.read_file(overlay)["experiments"]["syscall"]["batches"] == 2000  # integers stay integers
    # The negative control: the plain loader's string, which validation refuses.
    plain = yaml.safe_load(overlay.read_text())
    assert plain["experiments"]["echo"]["duration"] == "1e-9"
    with pytest.raises(iolab_config.ConfigError, match=r"'1(e-9|E-2)' should be of type number"):
        iolab_config.validate_config(iolab_config.merge(iolab_config.load(), plain))


def test_the_default_config_and_every_overlay_load() -> None:
    cfg = iolab_config.load()
    # The schema's defaults are filled in: a key config.yaml leaves out.
    assert cfg["experiments"]["mpi"]["netns"]["hosts"] >= 2
    for overlay in sorted((iolab_config.REPO / "config" / "overlays").glob("*.yaml")):
        assert iolab_config.load(overlay)["overlay"] == overlay.stem


def test_merge_is_snakemakes_overlay() -> None:
    base = {"a": {"b": 1, "c": [1, 2]}, "d": 1}
    assert iolab_config.merge(base, {"a": {"c": [3]}, "e": 2}) == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert base == {"a": {"b": 1, "c": [1, 2]}, "d": 1}


@pytest.mark.parametrize("overlay,expected", [BAD_CONFIGS[0], BAD_CONFIGS[-1]], ids=["schema", "semantics"])
def test_the_workflow_stops_with_that_one_line(workflow: Path, tmp_path: Path, overlay: dict, expected: str) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(overlay))
    res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(bad))
    assert res.returncode != 0
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and not ln.startswith(PREAMBLE)]
    assert len(lines) == 1, lines
    assert expected in lines[0], lines[0]


def test_the_workflow_reads_its_config_files_as_iolab_does(workflow: Path, tmp_path: Path) -> None:
    """Snakemake's own loader takes an alias bomb (the run then walked it for
    minutes without a word) and reads 1e-9 as a string; the workflow reads
    the files again as iolab does: the bomb is one line, 1e-9 a number."""
    bomb, small = tmp_path / "bomb.yaml", tmp_path / "small.yaml"
    bomb.write_text(ALIAS_BOMB)
    small.write_text("experiments:\n  echo:\n    duration: 1e-9\n")
    res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(bomb))
    lines = [ln for ln in (res.stdout + res.stderr).splitlines() if ln.strip() and not ln.startswith(PREAMBLE)]
    assert res.returncode == 1 and len(lines) == 1, lines
    assert lines[0].startswith(f"config error in {bomb}: an anchor (&a0)"), lines[0]
    res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(small))
    assert res.returncode == 0, res.stderr[-2000:]


def test_overlays_are_valid(workflow: Path) -> None:
    for overlay in sorted((workflow / "config" / "overlays").glob("*.yaml")):
        res = snakemake(workflow, "-n", "--cores", "1", "--configfile", str(overlay))
        assert res.returncode == 0, f"{overlay.name}: {res.stderr[-2000:]}"


def test_example_inventory_is_valid_and_plans_mpi_across_nodes(workflow: Path) -> None:
    res = snakemake(workflow, "-n", "-p", "--cores", "1", "--configfile", "config/nodes.example.yaml")
    assert res.returncode == 0, res.stderr[-2000:]
    # metal1 measures MPI with its peer's entry passed along; metal2 measures
    # nothing of its own.
    assert "data/raw/metal1/mpi/" in res.stdout and "data/raw/metal2/" not in res.stdout
    commands = [ln for ln in res.stdout.splitlines() if "iolab.measure mpi" in ln and "data/raw/metal1/mpi/" in ln]
    assert commands and all("--peer-nodes" in c and '"name": "metal2"' in c for c in commands), commands


def test_the_config_readme_is_what_the_config_says() -> None:
    # config/README.md is generated (python -m iolab.configdoc): an overlay
    # or a schema description changed without it fails here.
    from iolab import configdoc

    assert configdoc.README.read_text() == configdoc.render(), "run python -m iolab.configdoc"
    for overlay in sorted((configdoc.CONFIG / "overlays").glob("*.yaml")):
        assert f"| `{overlay.stem}` |" in configdoc.render()


def _preset_lists(path: Path) -> dict[str, tuple[str, ...]]:
    """Where a config file lists preset names (as written: groups unexpanded)."""
    experiments = (yaml.safe_load(path.read_text()) or {}).get("experiments") or {}
    echo, latency = experiments.get("echo") or {}, experiments.get("latency") or {}
    where = {f"{path.name}: echo.only": echo.get("only"), f"{path.name}: latency.presets": latency.get("presets")}
    where |= {f"{path.name}: echo.setups[{i}].only": s.get("only") for i, s in enumerate(echo.get("setups") or [])}
    return {k: tuple(v) for k, v in where.items() if v}


def repeated_preset_lists(paths: list[Path], groups: dict[str, list[str]]) -> list[str]:
    """Lists of three or more presets written out in two places, or written
    where a group holds the same presets: each should name a group."""
    found: dict[frozenset[str], list[str]] = {}
    for path in paths:
        for where, names in _preset_lists(path).items():
            if len(names) >= 3:
                found.setdefault(frozenset(names), []).append(where)
    out = [" and ".join(places) for places in found.values() if len(places) > 1]
    expanded = {frozenset(iolab_config._expanded(members, groups)): name for name, members in groups.items()}
    out += [
        f"{place} is group {expanded[names]}"
        for names, places in found.items()
        if names in expanded
        for place in places
    ]
    return out


def test_a_preset_group_stands_for_its_presets_and_no_list_is_kept_twice(tmp_path: Path) -> None:
    files = [REPO / "config" / "config.yaml", *sorted((REPO / "config" / "overlays").glob("*.yaml"))]
    groups = yaml.safe_load(files[0].read_text())["experiments"]["echo"]["preset_groups"]
    assert repeated_preset_lists(files, groups) == []
    # A group (and a group inside a group) is its presets, in order, where
    # the config names it; the groups themselves never reach a measurement.
    modern = iolab_config.load(REPO / "config" / "overlays" / "modern.yaml")["experiments"]
    assert modern["echo"]["only"] == [*groups["modern"], "bundle_buf_inc", "napi"]
    assert modern["latency"]["presets"] == [*groups["modern"], "bundle_buf_inc"]
    assert "preset_groups" not in modern["echo"]
    # Negative control: the list written out again in an overlay is found.
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump({"experiments": {"echo": {"only": list(reversed(groups["ring_options"]))}}}))
    assert repeated_preset_lists([*files, again], groups) == ["again.yaml: echo.only is group ring_options"]
    twice = tmp_path / "twice.yaml"
    twice.write_text(yaml.safe_dump({"experiments": {"latency": {"presets": ["epoll", "default", "async"]}}}))
    assert repeated_preset_lists([again, twice, twice], {}) == [
        "twice.yaml: latency.presets and twice.yaml: latency.presets"
    ]


def test_every_config_key_says_what_it_means() -> None:
    """config/README.md gives each key's meaning: the generator refuses a key
    without a description, naming it; the keys every experiment shares are
    described once (iolab.manifests)."""
    import copy

    from iolab import configdoc, manifests
    from iolab.schema import config_schema

    schema = config_schema()
    assert configdoc.undescribed(schema) == []
    syscall = schema["properties"]["experiments"]["properties"]["syscall"]["properties"]
    assert syscall["batches"]["description"] == manifests.SHARED_DESCRIPTIONS["batches"]
    # The negative control: two keys stripped of their meaning are named.
    stripped = copy.deepcopy(schema)
    del stripped["properties"]["experiments"]["properties"]["echo"]["properties"]["bytes"]["description"]
    del stripped["properties"]["seed"]["description"]
    assert configdoc.undescribed(stripped) == ["seed", "experiments.echo.bytes"]
