"""Every ``kproto ...`` line of the shell blocks of README.md and docs/dump.md runs, and exits 0.

The lines run as a shell runs them (pipes to ``head`` and ``jq`` included), with
``kproto`` the CLI of this checkout, in a temporary directory holding the inputs
they name (``broker.pcap``, ``broker.pcapng``, ``rotated-*.pcap``, ``response.bin``,
``samples/``). Lines that start with another program (``tcpdump ... | kproto dump -``)
need a live capture and are not run; docs/dump.md's live pipe is tests/analyze/test_dump_live.py's.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest

import kproto
from tests.project.test_docs import ROOT, write_pcap, write_pcapng

FILES = ["README.md", "docs/dump.md"]
SHELL_FENCE = re.compile(r"^```(sh|bash|shell)\s*$")


def command_lines(path: str) -> list[tuple[int, str]]:
    lines = (ROOT / path).read_text(encoding="utf-8").splitlines()
    found, inside = [], False
    for number, line in enumerate(lines, 1):
        if SHELL_FENCE.match(line):
            inside = True
        elif line.strip() == "```":
            inside = False
        elif inside and line.startswith("kproto "):
            found.append((number, line))
    return found


COMMANDS = [(path, number, line) for path in FILES for number, line in command_lines(path)]


def test_the_docs_have_commands():
    assert sum(1 for c in COMMANDS if "kproto decode --hex" in c[2]) == 2
    assert len(COMMANDS) >= 8


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    from kproto.messages import MetadataResponse

    directory = tmp_path_factory.mktemp("commands")
    write_pcap(directory / "broker.pcap")
    write_pcapng(directory / "broker.pcapng")
    write_pcap(directory / "rotated-1.pcap")
    write_pcap(directory / "rotated-2.pcap")
    body = MetadataResponse(topics=[MetadataResponse.MetadataResponseTopic(name="orders", partitions=[])])
    (directory / "response.bin").write_bytes(
        kproto.encode_response(body, version=12, correlation_id=7, size_prefixed=True)
    )
    (directory / "samples").symlink_to(ROOT / "samples")
    return directory


@pytest.mark.parametrize("path,number,line", COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS])
def test_command_runs(path, number, line, inputs):
    for program in ("jq", "head"):
        if f"| {program}" in line and shutil.which(program) is None:
            pytest.skip(f"{program} is not installed (the line pipes kproto's output into it)")
    script = f'kproto() {{ {shlex.quote(sys.executable)} -m kproto.analyze.cli "$@"; }}\nset -o pipefail\n{line}\n'
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=inputs,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode == 0, f"{path}:{number}: {line}\n{result.stderr}"
    assert result.stderr == "", f"{path}:{number}: {result.stderr}"
