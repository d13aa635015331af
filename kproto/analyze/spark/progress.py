"""What ``kproto analyze`` shows on stderr while Spark works: phases, their times, task counts."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any


class Progress:
    """Phases and task counts on stderr while Spark works (a live line on a terminal)."""

    def __init__(self, spark, enabled: bool = True, stream=None, profile=None) -> None:
        self.spark = spark
        self.profile = profile  # a kproto.analyze.spark.profile.PhaseProfile told of every phase, or None
        self.enabled = enabled
        self.stream = stream or sys.stderr
        self.phase = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self._last = ""

    def __enter__(self) -> Progress:
        if self.enabled:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self.enabled:
            self._thread.join(2)
            if self.phase and exc[0] is None:
                self._finish_phase()

    def step(self, phase: str) -> None:
        """A new phase starts: the one before it is printed with how long it took."""
        if self.phase and self.enabled:
            self._finish_phase()
        self.phase = phase
        self.phase_started = time.monotonic()
        self.run_started = getattr(self, "run_started", self.phase_started)
        if self.profile is not None:
            self.profile.mark(phase)
        if self.enabled and self._tty:
            self._write(f"kproto analyze: {phase} ...", final=False)

    def done(self) -> None:
        """The last phase ended: it, then the whole run's time."""
        if self.profile is not None:
            self.profile.mark("done")
        if self.enabled and self.phase:
            self._finish_phase()
            self._write(f"kproto analyze: done in {time.monotonic() - self.run_started:.1f} s", final=True)
        self.phase = ""

    def _finish_phase(self) -> None:
        took = time.monotonic() - self.phase_started
        self._write(f"kproto analyze: {self.phase}: {took:.1f} s", final=True)

    def _write(self, text: str, final: bool) -> None:
        if self._tty:
            self.stream.write("\r" + text.ljust(len(self._last)) + ("\n" if final else ""))
            text = "" if final else text
        elif final:
            self.stream.write(text + "\n")
        self._last = text
        self.stream.flush()

    def _poll(self) -> None:
        tracker = self.spark.sparkContext.statusTracker()
        while not self._stop.wait(0.5):
            done = total = 0
            for stage_id in tracker.getActiveStageIds():
                info = tracker.getStageInfo(stage_id)
                if info is not None:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total and self._tty:
                self._write(f"kproto analyze: {self.phase} [{done}/{total} tasks]", final=False)
