"""One progress display for a workflow run, as a Snakemake logger plugin
(``--logger iolab``, which the workflow profile profiles/default sets for
every Snakemake 9 run from the repository root): steps done out of total,
what runs now (the experiment, repetition and cell, read from the job's log),
the time elapsed and an estimate of the time left, one line per finished
step, precision rounds' lines, and every failure in full with its logs.
Job details go to each job's log file and Snakemake's own log
(.snakemake/log/). On a terminal the status line is redrawn in place every
second; elsewhere (a pipe, CI) only whole lines are printed.

Only a run is displayed so: a dry run prints Snakemake's own output, and
so does anything that runs no workflow (a lint, a report, an unlock), whose
messages wait until Snakemake has either started the workflow (a run:
they were its preamble) or ended (they were its output).

The plugin module Snakemake discovers is plugins/snakemake_logger_plugin_iolab
(on the environment's path through ./repro's .pth file).
"""

from __future__ import annotations

import logging
import os
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from snakemake.logging import ColorizingTextHandler, DefaultFilter, DefaultFormatter
from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase

# Messages without an event that a reader needs; the rest (DAG building,
# job scheduling chatter) stays in the log file.
KEPT_PREFIXES = (
    "Nothing to be done",
    "Complete log",
    "Will exit after finishing",
    "Terminating",
    "Trying to restart",
    "MissingInputException",
    "WorkflowError",
    "Exiting because",
)


def minutes(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return (
        f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
        if seconds >= 3600
        else f"{seconds // 60}:{seconds % 60:02d}"
    )


@dataclass
class Job:
    rule: str
    wildcards: dict[str, str]
    logs: list[str]
    started: float | None = None

    def describe(self) -> str:
        """What the step does, in words."""
        w = self.wildcards
        if self.rule.startswith("measure_"):
            experiment = self.rule.removeprefix("measure_")
            return f"measure {experiment} rep {w.get('rep', '?')} on {w.get('node', '?')}"
        if self.rule.startswith("notebook_"):
            return f"notebook {self.rule.removeprefix('notebook_')}"
        if self.rule == "tidy_table":
            return f"table {w.get('experiment', '')}".strip()
        if self.rule == "precision_plan":
            return f"precision plan, round {w.get('round', '?')}"
        return self.rule.replace("_", " ")

    def activity(self) -> str:
        """The last progress line the job wrote to its log (e.g. the echo cell)."""
        for log in self.logs:
            try:
                with open(log, "rb") as f:
                    f.seek(0, os.SEEK_END)
                    f.seek(max(0, f.tell() - 4096))
                    lines = f.read().decode(errors="replace").splitlines()
            except OSError:
                continue
            for line in reversed(lines):
                if line.startswith("iolab: ") and "[" in line:
                    return line.removeprefix("iolab: ")
        return ""


@dataclass
class Progress:
    """The run's state, from Snakemake's log events."""

    out: TextIO
    live: bool
    start: float = field(default_factory=time.monotonic)
    done: int = 0
    total: int = 0
    planned: dict[str, int] = field(default_factory=dict)
    jobs: dict[int, Job] = field(default_factory=dict)
    running: set[int] = field(default_factory=set)
    started: dict[int, float] = field(default_factory=dict)  # started, details not yet seen
    durations: dict[str, list[float]] = field(default_factory=dict)
    last: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def left(self) -> float | None:
        """Seconds expected for the steps not done: per rule, the mean of
        its finished steps (else of every finished step) times its count."""
        finished = [d for ds in self.durations.values() for d in ds]
        if not finished:
            return None
        overall = statistics.fmean(finished)
        total = 0.0
        for rule, count in self.planned.items():
            if rule == "all":  # the target: nothing to run
                continue
            ds = self.durations.get(rule, [])
            total += max(count - len(ds), 0) * (statistics.fmean(ds) if ds else overall)
        return total

    def status(self) -> str:
        elapsed = time.monotonic() - self.start
        left = self.left()
        head = f"[{self.done}/{self.total or '?'}] {minutes(elapsed)} elapsed" + (
            f", about {minutes(left)} left" if left is not None else ""
        )
        now = [self.jobs[j] for j in sorted(self.running) if j in self.jobs]
        if now:
            job = now[0]
            activity = job.activity()
            head += f" · {job.describe()}" + (f": {activity}" if activity else "")
        return head

    def line(self, text: str) -> None:
        with self.lock:
            if self.live:
                self.out.write("\r\x1b[K")
            self.out.write(text + "\n")
            if self.live:
                self.out.write(self.status()[: max(20, _width() - 1)])
            self.out.flush()

    def redraw(self) -> None:
        with self.lock:
            self.out.write("\r\x1b[K" + self.status()[: max(20, _width() - 1)])
            self.out.flush()

    def handle(self, record: logging.LogRecord) -> None:
        event = getattr(record, "event", None)
        if event == LogEvent.RUN_INFO:
            stats = dict(getattr(record, "stats", {}) or {})
            self.total = int(stats.pop("total", sum(stats.values())))
            self.planned.update({k: int(v) for k, v in stats.items()})
        elif event == LogEvent.JOB_INFO:
            # Snakemake 9 announces a job's start before its details.
            j = int(vars(record)["jobid"])
            self.jobs[j] = Job(
                str(vars(record)["rule_name"]),
                dict(getattr(record, "wildcards", {}) or {}),
                [str(x) for x in (getattr(record, "log", None) or [])],
                started=self.started.pop(j, None),
            )
        elif event == LogEvent.JOB_STARTED:
            for j in map(int, getattr(record, "jobs", []) or []):
                self.running.add(j)
                if j in self.jobs:
                    self.jobs[j].started = time.monotonic()
                else:
                    self.started[j] = time.monotonic()
        elif event == LogEvent.JOB_FINISHED:
            j = int(vars(record)["job_id"])
            self.running.discard(j)
            job = self.jobs.get(j)
            if job is not None and job.started is not None:
                seconds = time.monotonic() - job.started
                self.durations.setdefault(job.rule, []).append(seconds)
                self.last = f"{job.describe()} ({seconds:.0f} s)"
        elif event == LogEvent.PROGRESS:
            self.done, self.total = int(vars(record)["done"]), int(vars(record)["total"])
            if self.last:
                self.line(f"{self.status().split(' · ')[0]} · done: {self.last}")
                self.last = ""
        elif event in (LogEvent.JOB_ERROR, LogEvent.GROUP_ERROR):
            j = int(getattr(record, "jobid", -1) or -1)
            self.running.discard(j)
            logs = [str(x) for x in (getattr(record, "log", None) or [])]
            self.line(f"FAILED: {record.getMessage()}")
            for log in logs:
                try:
                    text = Path(log).read_text(errors="replace").rstrip()
                except OSError:
                    text = "(no log)"
                self.line(f"--- {log}\n{text}\n---")
        elif event == LogEvent.ERROR or record.levelno >= logging.WARNING:
            self.line(explained(record.getMessage()))
        elif event is None:
            message = record.getMessage()
            if message.startswith(KEPT_PREFIXES):
                self.line(message)


# Snakemake's words when a job whose outputs are flagged update() fails on
# its first try: there was no earlier file to put back. The raw files are
# written through temporaries, so a failed repetition leaves nothing.
NO_BACKUP = re.compile(r"Cannot restore (?P<path>.+): no backup found\.?$")


def explained(message: str) -> str:
    """A Snakemake warning as it reads here (most pass unchanged)."""
    m = NO_BACKUP.match(message)
    if m:
        return (
            f"{m['path']}: not written (the repetition failed before it finished, and no earlier "
            "version existed to restore); it is measured again on the next run"
        )
    return message


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 100


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    """The display has no settings of its own."""


class LogHandler(LogHandlerBase):
    """Snakemake's log handler for the display (see the module's docstring)."""

    def __post_init__(self) -> None:
        settings = self.common_settings
        # Snakemake's own output, for what is not a run.
        self.plain = ColorizingTextHandler(
            nocolor=settings.nocolor, stream=sys.stdout if settings.stdout else sys.stderr
        )
        self.plain.addFilter(
            DefaultFilter(
                settings.quiet, settings.debug_dag, settings.verbose, settings.dryrun, settings.printshellcmds
            )
        )
        self.plain.setFormatter(DefaultFormatter(settings.quiet, settings.show_failed_logs))
        self.waiting: list[logging.LogRecord] | None = None if settings.dryrun else []
        self.progress: Progress | None = None
        self._stop = threading.Event()

    def _start(self) -> None:
        """The workflow started: the display takes over. What waited was its
        preamble; of that, only what the display shows of any message stays."""
        live = sys.stderr.isatty() and os.environ.get("TERM", "dumb") != "dumb" and not os.environ.get("CI")
        self.progress = Progress(sys.stderr, live)
        waited, self.waiting = self.waiting or [], None
        for record in waited:
            self.progress.handle(record)
        if live:
            threading.Thread(target=self._tick, daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(1.0):
            if self.progress is not None:
                self.progress.redraw()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.waiting is not None and getattr(record, "event", None) == LogEvent.WORKFLOW_STARTED:
                self._start()
            if self.progress is not None:
                self.progress.handle(record)
            elif self.waiting is not None:
                self.waiting.append(record)
            else:
                self.plain.handle(record)
        except Exception:  # a display must never stop the run
            self.handleError(record)

    def close(self) -> None:
        self._stop.set()
        # No workflow started: what waited was the command's output.
        for record in self.waiting or []:
            self.plain.handle(record)
        self.waiting = None
        if self.progress is not None and self.progress.live:
            self.progress.out.write("\n")
        self.plain.close()
        super().close()

    @property
    def writes_to_stream(self) -> bool:
        return True

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
