"""The capture-sets figure of docs/analyze.md: a capture cut into 2, 5 and 50 files changes no table.

    .venv/bin/python tools/capture_sets_figure.py      # prints the Markdown table

Two captures - samples/sample.pcap and one whose Produce requests span two packets each
(tests/spark_captures.py, so cuts fall inside frames) - are cut at record boundaries into
N pcap files and analysed without Spark (the worker and the driver's combining, as
``kproto analyze`` runs them) as one capture set, and file by file (``--no-capture-sets``).
A table is "as unsplit" when its sorted rows equal the unsplit capture's but for the
columns that name or count the files. tests/analyze/test_capture_sets.py checks that the table in
docs/analyze.md is what this prints.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kproto.analyze.spark import capture_sets as CS  # noqa: E402
from kproto.analyze.spark import planning as P  # noqa: E402
from tests import capture_pieces as cp  # noqa: E402
from tests import spark_captures as sc  # noqa: E402

TABLES = ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")
PIECES = (2, 5, 50)
HEADER = (
    "| capture | files | read as | tables as unsplit | connections | exchanges paired | unpaired | "
    "tail + skipped bytes |\n| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |"
)


def captures() -> dict[str, bytes]:
    return {
        "sample.pcap": (ROOT / "samples" / "sample.pcap").read_bytes(),
        "spanning frames": sc.big_capture(connections=3, exchanges=10),
    }


def _row(name: str, files: int, read_as: str, tables: dict, unsplit: dict) -> str:
    equal = sum(cp.table_rows(tables[t]) == cp.table_rows(unsplit[t]) for t in TABLES)
    total = tables["summary"].to_pylist()[-1]
    return (
        f"| {name} | {files} | {read_as} | {equal} of {len(TABLES)} | {total['connections']} | "
        f"{total['exchanges_paired']} | {total['unpaired_requests'] + total['unpaired_responses']} | "
        f"{total['tail_bytes'] + total['skipped_bytes']} |"
    )


def figure() -> str:
    """The Markdown table."""
    rows = [HEADER]
    with tempfile.TemporaryDirectory() as scratch:
        for name, data in captures().items():
            directory = Path(scratch) / name.replace(" ", "-")
            whole = cp.write_pieces(directory / "whole", ["capture.pcap"], [data])[0]
            unsplit = cp.analysed(P.plan_file(str(whole), 0))
            rows.append(_row(name, 1, "one file", unsplit, unsplit))
            for pieces in PIECES:
                paths = cp.write_pieces(
                    directory / str(pieces), cp.dumpcap_names("capture", pieces), cp.cut_pcap(data, pieces)
                )
                heads = [P.file_head(str(p), p.stat().st_size) for p in paths]
                (found,) = CS.detect_sets(heads)
                as_set = P.plan_set(found.name, [(h.path, h.size) for h in found.files], "pcap")
                rows.append(_row(name, pieces, "one capture set", cp.analysed([as_set]), unsplit))
                alone = [s for p in paths for s in P.plan_file(str(p), 0)]
                rows.append(_row(name, pieces, "files alone", cp.analysed(alone), unsplit))
    return "\n".join(rows)


if __name__ == "__main__":
    print(figure())
