"""benchmarks/spark_events.py: an analysis's wall split into Spark jobs, stages and the driver's own time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from spark_events import breakdown, read_events  # noqa: E402


def _task(stage: int, launch: int, finish: int, executor: str, locality: str, run: int) -> dict:
    return {
        "Event": "SparkListenerTaskEnd",
        "Stage ID": stage,
        "Task Info": {"Launch Time": launch, "Finish Time": finish, "Executor ID": executor, "Locality": locality},
        "Task Metrics": {"Executor Run Time": run, "Executor Deserialize Time": 7},
    }


def _write_log(path: Path) -> list[Path]:
    events = [
        {"Event": "SparkListenerLogStart", "Spark Version": "4.3.0"},
        # Job 0 before the window, jobs 1 and 2 inside it (overlapping), job 3 after it.
        {"Event": "SparkListenerJobStart", "Job ID": 0, "Submission Time": 500, "Stage IDs": [0]},
        {"Event": "SparkListenerJobEnd", "Job ID": 0, "Completion Time": 900},
        {"Event": "SparkListenerJobStart", "Job ID": 1, "Submission Time": 1100, "Stage IDs": [1, 2]},
        _task(2, 1150, 1400, "0", "PROCESS_LOCAL", 200),
        _task(2, 1160, 1500, "1", "NODE_LOCAL", 300),
        {
            "Event": "SparkListenerStageCompleted",
            "Stage Info": {
                "Stage ID": 2,
                "Stage Name": "toArrow at jobs.py",
                "Number of Tasks": 2,
                "Submission Time": 1120,
                "Completion Time": 1500,
            },
        },
        {"Event": "SparkListenerJobStart", "Job ID": 2, "Submission Time": 1400, "Stage IDs": [3]},
        {"Event": "SparkListenerJobEnd", "Job ID": 1, "Completion Time": 1500},
        {"Event": "SparkListenerJobEnd", "Job ID": 2, "Completion Time": 1600},
        {"Event": "SparkListenerJobStart", "Job ID": 3, "Submission Time": 2500, "Stage IDs": [4]},
        {"Event": "SparkListenerJobEnd", "Job ID": 3, "Completion Time": 2600},
    ]
    # Spark 4 rolls the log into numbered files: the events continue from one file into the next.
    first, second = path / "events_1_app", path / "events_2_app"
    first.write_text("".join(json.dumps(e) + "\n" for e in events[:6]))
    second.write_text("".join(json.dumps(e) + "\n" for e in events[6:]))
    return [first, second]


def test_jobs_stages_and_tasks_are_read_across_rolled_files(tmp_path):
    jobs, stages = read_events(_write_log(tmp_path))
    assert sorted(jobs) == [0, 1, 2, 3] and jobs[1].completed == 1500
    stage = stages[2]
    assert (stage.name, stage.tasks, stage.submitted, stage.executors) == ("toArrow at jobs.py", 2, 1120, {"0", "1"})
    assert dict(stage.localities) == {"PROCESS_LOCAL": 1, "NODE_LOCAL": 1} and stage.run_ms == [200, 300]


def test_the_window_s_wall_splits_into_jobs_and_the_driver_alone(tmp_path):
    lines = breakdown(_write_log(tmp_path), 1000, 2000)
    # Jobs 1 and 2 overlap: busy from 1100 to 1600 is 500 ms, counted once; the rest is the driver's.
    assert lines[0] == "  wall 1000 ms: 2 job(s) 500 ms, driver alone 500 ms"
    assert lines[1] == "  job 1: +100 ms, 400 ms"
    assert lines[2] == (
        "    stage 2 (toArrow at jobs.py): 2 task(s) on ['0', '1'], first launch +30 ms, "
        "tasks 350 ms (run max 300, deserialise max 7), NODE_LOCAL:1,PROCESS_LOCAL:1"
    )
    assert lines[3] == "  job 2: +400 ms, 200 ms"  # its stage ran no task in the log: no stage line
    assert len(lines) == 4
