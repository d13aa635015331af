"""Where the time of a run goes: wall time and Spark jobs per phase (``kproto analyze --profile``).

A :class:`PhaseProfile` is told when each phase starts (``mark``); the Spark jobs
of a phase are the jobs Spark's status tracker knows at the next mark and did not
know at this one. Jobs in a job group (set by the caller of :func:`kproto.analyze.spark.analyze`)
are not counted. Used by docs/analyze.md, "Where the time goes", and
benchmarks/bench_spark.py.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, TextIO


@dataclass
class Phase:
    name: str
    seconds: float = 0.0
    jobs: int = 0
    tasks: int = 0


@dataclass
class PhaseProfile:
    phases: list[Phase] = field(default_factory=list)
    _spark: Any = None
    _started: float = 0.0
    _known_jobs: set[int] = field(default_factory=set)

    def attach(self, spark: Any) -> None:
        """From now on, count the Spark jobs of each phase."""
        self._spark = spark
        self._known_jobs = set(self._job_ids())

    def mark(self, name: str) -> None:
        """The phase ``name`` starts now (and the one before ends)."""
        self._close()
        self.phases.append(Phase(name))
        self._started = time.perf_counter()

    def finish(self) -> None:
        self._close()

    def _close(self) -> None:
        if not self.phases or self._started == 0.0:
            return
        current = self.phases[-1]
        current.seconds += time.perf_counter() - self._started
        self._started = 0.0
        new = set(self._job_ids()) - self._known_jobs
        self._known_jobs |= new
        current.jobs += len(new)
        current.tasks += self._tasks(new)

    def _job_ids(self) -> list[int]:
        if self._spark is None:
            return []
        return list(self._spark.sparkContext.statusTracker().getJobIdsForGroup())

    def _tasks(self, jobs: set[int]) -> int:
        if self._spark is None:
            return 0
        tracker = self._spark.sparkContext.statusTracker()
        tasks = 0
        for job in jobs:
            info = tracker.getJobInfo(job)
            for stage in info.stageIds if info is not None else ():
                stage_info = tracker.getStageInfo(stage)
                tasks += stage_info.numTasks if stage_info is not None else 0
        return tasks

    def table(self) -> str:
        """The phases as a Markdown table (wall seconds, Spark jobs, their tasks) and the total."""
        lines = ["| phase | seconds | Spark jobs | tasks |", "| --- | --- | --- | --- |"]
        for p in self.phases:
            lines.append(f"| {p.name} | {p.seconds:.2f} | {p.jobs} | {p.tasks} |")
        lines.append(
            f"| total | {sum(p.seconds for p in self.phases):.2f} | {sum(p.jobs for p in self.phases)} "
            f"| {sum(p.tasks for p in self.phases)} |"
        )
        return "\n".join(lines)

    def write(self, stream: TextIO) -> None:
        stream.write(self.table() + "\n")
