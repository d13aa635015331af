"""A program using kproto passes ``mypy --strict``: README's Use example, and one using captures,
records, the batch decoder and versions.

kproto is checked as an installed package is (its own modules' errors are not the user's:
``ignore_errors`` for ``kproto.*``); what must hold is that calling it from strictly typed code
needs no casts: typed bodies (``body_as``), typed public functions. mypy comes with the test
extra (pyproject.toml), which scripts/setup.sh installs.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

USER_PROGRAM = """
from kproto.arrow.capture import CaptureReader, read_capture
from kproto.records import Records
import kproto.arrow.frames as kb
from kproto import versions

reader = CaptureReader("x.pcap")
for batch in reader:
    print(batch.num_rows)
table = reader.connections()
print(table.num_rows, reader.counters, reader.error)
frames, connections, counters = read_capture("x.pcap")
print(frames.num_rows, connections, counters)
for record in Records(b"").records():
    print(record.value)
decoded = kb.decode_frames(frames["payload"])
print(decoded.num_rows, versions.api_key_of("Produce"))
"""


def readme_use_example() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split("\n## Use\n", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]


def mypy_strict(tmp_path: Path, source: str) -> subprocess.CompletedProcess:
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it is in the test extra: scripts/setup.sh installs it)")
    program = tmp_path / "program.py"
    program.write_text(source)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\n\n[mypy-kproto.*]\nignore_errors = True\n")
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(config),
            "--cache-dir",
            str(tmp_path / "cache"),
            "--python-executable",
            sys.executable,
            str(program),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, MYPYPATH=str(ROOT)),
    )


def test_readme_use_example_passes_mypy_strict(tmp_path):
    result = mypy_strict(tmp_path, readme_use_example())
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_program_of_captures_records_batch_and_versions_passes_mypy_strict(tmp_path):
    result = mypy_strict(tmp_path, USER_PROGRAM)
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_untyped_body_access_is_caught(tmp_path):
    """The check can fail: ``request.body.topics`` (a Message) is an error under --strict."""
    result = mypy_strict(
        tmp_path,
        "import kproto\nfrom kproto.messages import MetadataRequest\n"
        "r = kproto.decode_request(b'')\nprint(r.body.topics)\n",
    )
    assert result.returncode == 1 and '"Message" has no attribute "topics"' in result.stdout
