"""Where the time of an analysis goes, from a Spark event log (benchmarks only, not a test).

``breakdown(log, start_ms, end_ms)`` reads the JSON event log Spark writes with
``spark.eventLog.enabled`` and splits the wall time of one analysis (epoch
milliseconds, as the driver measured it) into:

* ``driver``: time when no Spark job ran (listing, planning in the driver, combining);
* per job: its wall time, and inside it per stage the scheduler's delay before the
  first task launched, the tasks' wall (first launch to last finish), the slowest
  task's executor deserialisation and run time, and the task localities.

Used by ``bench_spark_cluster.py --breakdown`` to compare the cluster with local mode.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stage:
    stage_id: int
    name: str
    tasks: int = 0
    submitted: int = 0
    completed: int = 0
    launches: list[int] = field(default_factory=list)
    finishes: list[int] = field(default_factory=list)
    run_ms: list[int] = field(default_factory=list)
    deserialize_ms: list[int] = field(default_factory=list)
    localities: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    executors: set[str] = field(default_factory=set)

    def line(self) -> str:
        first_launch = min(self.launches) - self.submitted if self.launches else 0
        span = max(self.finishes) - min(self.launches) if self.launches else 0
        local = ",".join(f"{k}:{v}" for k, v in sorted(self.localities.items()))
        return (
            f"stage {self.stage_id} ({self.name[:40]}): {self.tasks} task(s) on {sorted(self.executors)}, "
            f"first launch +{first_launch} ms, tasks {span} ms (run max {max(self.run_ms, default=0)}, "
            f"deserialise max {max(self.deserialize_ms, default=0)}), {local}"
        )


@dataclass
class Job:
    job_id: int
    submitted: int
    completed: int = 0
    stage_ids: list[int] = field(default_factory=list)


def _lines(logs: list[Path]):
    for log in logs:
        with open(log) as lines:
            yield from lines


def read_events(logs: list[Path]) -> tuple[dict[int, Job], dict[int, Stage]]:
    """Jobs and stages of an application's event log files (in order)."""
    jobs: dict[int, Job] = {}
    stages: dict[int, Stage] = {}
    for line in _lines(logs):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = Job(event["Job ID"], event["Submission Time"], stage_ids=event["Stage IDs"])
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]].completed = event["Completion Time"]
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            stage = stages.setdefault(info["Stage ID"], Stage(info["Stage ID"], info["Stage Name"]))
            stage.name = info["Stage Name"]
            stage.tasks = info["Number of Tasks"]
            stage.submitted = info.get("Submission Time", 0)
            stage.completed = info.get("Completion Time", 0)
        elif kind == "SparkListenerTaskEnd":
            info, metrics = event["Task Info"], event.get("Task Metrics") or {}
            stage = stages.setdefault(event["Stage ID"], Stage(event["Stage ID"], ""))
            stage.launches.append(info["Launch Time"])
            stage.finishes.append(info["Finish Time"])
            stage.localities[info["Locality"]] += 1
            stage.executors.add(info["Executor ID"])
            stage.run_ms.append(metrics.get("Executor Run Time", 0))
            stage.deserialize_ms.append(metrics.get("Executor Deserialize Time", 0))
    return jobs, stages


def breakdown(logs: list[Path], start_ms: int, end_ms: int) -> list[str]:
    """Lines describing the jobs submitted between ``start_ms`` and ``end_ms`` and the driver's time around them."""
    jobs, stages = read_events(logs)
    inside = sorted((j for j in jobs.values() if start_ms <= j.submitted <= end_ms), key=lambda j: j.submitted)
    lines = []
    busy = 0
    covered_until = start_ms
    for job in inside:
        busy += max(0, job.completed - max(job.submitted, covered_until))
        covered_until = max(covered_until, job.completed)
        lines.append(f"  job {job.job_id}: +{job.submitted - start_ms} ms, {job.completed - job.submitted} ms")
        for stage_id in sorted(job.stage_ids):
            stage = stages.get(stage_id)
            if stage is not None and stage.launches:  # skipped stages (their output reused) ran no task
                lines.append("    " + stage.line())
    lines.insert(
        0, f"  wall {end_ms - start_ms} ms: {len(inside)} job(s) {busy} ms, driver alone {end_ms - start_ms - busy} ms"
    )
    return lines
