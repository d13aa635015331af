"""The start-up banners of a JVM that Spark starts, kept off the user's stderr.

A local session's JVM inherits this process's stderr and writes five lines at start
(the incubator-module warning of the JDK, log4j's and Spark's default-profile notes,
the native-hadoop warning) that say nothing about the analysis, ``--quiet`` or not.
While the JVM starts, its stderr is a pipe that a thread forwards line by line to the
real stderr, dropping those lines only: anything else the JVM (or a Python worker it
starts) writes later still reaches the user.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

#: Lines of a JVM's start that are noise (each a regular expression searched in the line).
BANNERS = tuple(
    re.compile(pattern)
    for pattern in (
        r"^WARNING: Using incubator modules: ",
        r"^Using Spark's default log4j profile: ",
        r"^Setting default log level to ",
        r"^To adjust logging level use sc\.setLogLevel\(newLevel\)",
        r" WARN NativeCodeLoader: Unable to load native-hadoop library",
    )
)


def is_banner(line: str) -> bool:
    return any(pattern.search(line) for pattern in BANNERS)


def _forward(read_end: int, target: int) -> None:
    """Copy the pipe's lines to ``target`` but the banners, until every writer closed it."""
    with open(read_end, "rb", closefd=True) as pipe:
        for line in pipe:
            if not is_banner(line.decode("utf-8", "replace")):
                os.write(target, line)
    os.close(target)


@contextlib.contextmanager
def banners_dropped() -> Iterator[None]:
    """Processes started in this block (the JVM) write to stderr through the banner filter."""
    try:
        stderr_fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stderr without a file (captured): nothing to do
        yield
        return
    sys.stderr.flush()
    saved = os.dup(stderr_fd)
    read_end, write_end = os.pipe()
    os.dup2(write_end, stderr_fd)
    os.close(write_end)
    threading.Thread(target=_forward, args=(read_end, os.dup(saved)), daemon=True, name="kproto-jvm-stderr").start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, stderr_fd)  # this process writes to its stderr again; the JVM keeps the pipe
        os.close(saved)
