"""The codec-only install: ``kproto decode`` needs no numpy, and a command whose extra is
missing says so in one line with a hint that works from an index and from a checkout.

The missing packages are simulated in a subprocess (``sys.modules[name] = None`` makes
their import fail as an absent package's does)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
METADATA_V12 = "0003000c0000000700026d65000200000000000000000000000000000000076f726465727300010000"


def run_without(packages: list[str], *argv: str) -> subprocess.CompletedProcess:
    code = (
        "import sys\n"
        f"for name in {packages!r}: sys.modules[name] = None\n"
        "from kproto.analyze.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_decode_needs_no_numpy():
    for fmt in ("json", "tree"):
        result = run_without(["numpy", "pyarrow"], "decode", "--hex", METADATA_V12, "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert "orders" in result.stdout and result.stderr == ""


def test_dump_without_arrow_is_one_line_with_both_hints():
    result = run_without(["numpy", "pyarrow"], "dump", "samples/sample.pcap")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "kproto dump: needs numpy, which is not installed: pip install 'kproto[arrow]' "
        "(from a checkout: pip install '.[arrow]')\n"
    )


def test_analyze_without_spark_names_the_extra():
    result = run_without(["pyspark"], "analyze", "samples/sample.pcap", "--out", "/nonexistent/out")
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert "pip install '.[spark]'" in result.stderr and "Traceback" not in result.stderr
