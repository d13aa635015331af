"""``kproto ... | head``: a reader that closes the pipe early ends the command quietly.

Each command runs as a subprocess, the way a shell pipeline runs it, with its
stdout a pipe whose reader goes away: exit status 0 and nothing on stderr (no
BrokenPipeError traceback, no "Exception ignored" from the flush at exit).
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys

import pytest

import kproto
from kproto import versions

COMMAND = [sys.executable, "-m", "kproto.analyze.cli"]


@pytest.fixture(scope="module")
def response_file(tmp_path_factory):
    from kproto.messages import ApiVersionsResponse

    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=lo, max_version=hi)
            for key, (lo, hi) in sorted(versions.release_table("3.9").items())
        ],
    )
    path = tmp_path_factory.mktemp("cli") / "response.bin"
    path.write_bytes(kproto.encode_response(body, version=3, correlation_id=7, size_prefixed=True))
    return path


# every subcommand's output modes, and the top-level ones (argparse prints those, then exits)
ARGUMENTS = [
    [],
    ["--help"],
    ["--version"],
    ["versions"],
    ["versions", "--api", "Produce", "--api", "Fetch"],
    ["versions", "--release", "3.9"],
    ["versions", "--release", "0.10.0", "--release", "4.0"],
    ["versions", "--response", "{response}"],
    ["versions", "--help"],
    ["analyze", "--help"],
]


def _argv(arguments, response_file):
    return COMMAND + [a.format(response=response_file) for a in arguments]


@pytest.mark.parametrize("arguments", ARGUMENTS, ids=lambda a: " ".join(a) or "(none)")
def test_reader_gone_before_the_first_write(arguments, response_file):
    # the read end is closed before the command starts: its very first write meets a closed pipe
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            _argv(arguments, response_file), stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=60
        )
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 0


def test_reader_stops_after_one_line(response_file):
    # like `kproto versions | head -1`: the command is mid-output when the reader goes away.
    # The pipe is made as small as the kernel allows before the command starts, so the
    # table (about 9 KB) cannot fit in it: the command is still writing when it closes.
    read_end, write_end = os.pipe()
    fcntl.fcntl(write_end, fcntl.F_SETPIPE_SZ, 4096)
    try:
        process = subprocess.Popen(_argv(["versions"], response_file), stdout=write_end, stderr=subprocess.PIPE)
    finally:
        os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        first = reader.readline()
    _, err = process.communicate(timeout=60)
    assert first.split()[:2] == [b"key", b"name"]
    assert err.decode() == ""
    assert process.returncode == 0
