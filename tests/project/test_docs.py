"""Every ```python block of README.md and docs/*.md runs here, on real bytes.

How the blocks run:

* The blocks of one markdown file run in order in one namespace, since later
  blocks build on earlier ones (docs/records.md reads ``records`` in its Writing
  block). Each file gets a fresh namespace and runs in a fresh temporary working
  directory holding the inputs its text names (``broker.pcap``, ``caps/*.pcap``,
  ...), written here from ``tests/pcapwriter.py`` / ``tests/spark_captures.py``.
* Names a block takes as given ("your" data: ``data``, ``response``,
  ``fetch_partition``) are built in ``PREPARE`` below from encoded messages, never
  typed-in results.
* A claimed value is checked: when an expression statement is followed by a
  comment (on its line or the lines after it) that reads as a Python literal, the
  expression must equal it. ``x.y  # (7, 'orders')`` is checked; ``# e.g. ...`` is
  not (not a literal).
* Markers, an HTML comment on the line before the fence:
  ``<!-- doc-test: spark -->`` needs pyspark and Java: the block runs in its own
  namespace in ``test_spark_blocks``, skipped with the reason when either is missing.
  ``<!-- doc-test: skip REASON -->`` is not runnable; ``NOT_RUNNABLE`` lists every
  such block, so a new one is not skipped silently.
* ``>>>`` blocks run as doctests.

The suite runs twice (extension and KPROTO_NO_EXTENSIONS=1); no block here depends
on which implementation is loaded.
"""

from __future__ import annotations

import ast
import doctest
import os
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest

import kproto
from tests import spark_captures
from tests.pcapwriter import Conversation, PcapngWriter, PcapWriter

ROOT = Path(__file__).resolve().parents[2]
DOC_FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs").glob("decisions/*.md"))]

FENCE = re.compile(r"^```python\b.*$")
MARKER = re.compile(r"^<!--\s*doc-test:\s*(\w+)\s*(.*?)\s*-->$")

# (file, first words of the reason) of every block marked "skip".
NOT_RUNNABLE = {
    ("docs/analyze.md", "spark-submit driver script"),
    ("docs/batch.md", "signature listing"),
    ("docs/versions.md", "needs a live broker"),
}


@dataclass
class Block:
    path: str  # relative to the repository
    line: int  # line of the opening fence
    code: str
    kind: str  # "run", "spark" or "skip"
    reason: str


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks = []
    index = 0
    while index < len(lines):
        if not FENCE.match(lines[index]):
            index += 1
            continue
        start = index
        index += 1
        body = []
        while lines[index].strip() != "```":
            body.append(lines[index])
            index += 1
        kind, reason = "run", ""
        previous = start - 1
        while previous >= 0 and not lines[previous].strip():
            previous -= 1
        marker = MARKER.match(lines[previous].strip()) if previous >= 0 else None
        if marker:
            kind, reason = marker.group(1), marker.group(2)
            assert kind in ("spark", "skip"), f"{path.name}:{start + 1}: unknown marker {kind!r}"
        blocks.append(Block(str(path.relative_to(ROOT)), start + 1, "\n".join(body) + "\n", kind, reason))
        index += 1
    return blocks


ALL_BLOCKS = [block for path in DOC_FILES for block in blocks_of(path)]


# ---------------------------------------------------------------- inputs
def capture_packets():
    conversation = Conversation(client=("10.0.0.1", 40001), server=("10.0.0.9", 9092))
    request = spark_captures.request(spark_captures.produce("orders", 0, spark_captures.records(3)), 9, 1, "me")
    response = spark_captures.response(spark_captures.produce_ok("orders", 0), 9, 1)
    return (
        conversation.handshake()
        + conversation.data("client", request, [1000])
        + conversation.data("server", response, [1000])
        + conversation.close()
    )


def write_pcap(path: Path) -> None:
    writer = PcapWriter()
    for index, packet in enumerate(capture_packets()):
        writer.add(spark_captures.START_NS + index * 1000, packet.data)
    path.write_bytes(writer.getvalue())


def write_pcapng(path: Path) -> None:
    writer = PcapngWriter()
    writer.add_interface()
    for index, packet in enumerate(capture_packets()):
        writer.add(0, spark_captures.START_NS + index * 1000, packet.data)
    path.write_bytes(writer.getvalue())


def write_broken_pcap(path: Path) -> None:
    """A good capture, then a record header claiming 4 GiB (as a rotated file's torn end can)."""
    write_pcap(path)
    with path.open("ab") as out:
        out.write(struct.pack("<IIII", 0, 0, 0xFFFFFFF0, 0xFFFFFFF0))


def api_versions_response(release: str):
    from kproto import versions
    from kproto.messages import ApiVersionsResponse

    ranges = versions.release_table(release)
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=low, max_version=high)
            for key, (low, high) in sorted(ranges.items())
        ],
    )
    payload = kproto.encode_response(body, version=3, correlation_id=1)
    return kproto.decode_response(payload, api_key=18, api_version=3).body


def fetch_partition_cut_short():
    """A partition of a decoded Fetch v12 response whose second batch is cut short."""
    from kproto.messages import FetchResponse

    first = spark_captures.records(2)
    second = spark_captures.records(3)
    partition = FetchResponse.PartitionData(
        partition_index=0, high_watermark=5, records=first + second[: len(second) // 2]
    )
    body = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="orders", partitions=[partition])])
    payload = kproto.encode_response(body, version=12, correlation_id=1)
    return kproto.decode_response(payload, api_key=1, api_version=12).body.responses[0].partitions[0]


def prepare_capture(directory: Path) -> dict:
    write_pcapng(directory / "broker.pcapng")
    write_pcap(directory / "broker.pcap")
    write_broken_pcap(directory / "rotated.pcap")
    return {}


def prepare_records(directory: Path) -> dict:
    return {"data": spark_captures.records(3, "gzip"), "fetch_partition": fetch_partition_cut_short()}


def prepare_versions(directory: Path) -> dict:
    response = api_versions_response("3.9")
    return {
        "response": response,
        "broker": response,
        "resp_b1": response,
        "resp_b2": response,
        "resp_b3": api_versions_response("4.0"),
        "client": {"Produce": (3, 13), "Fetch": (4, 17)},
    }


def prepare_analyze(directory: Path) -> dict:
    (directory / "caps").mkdir()
    (directory / "caps" / "small.pcap").write_bytes(spark_captures.small_capture())
    return {}


PREPARE = {
    "docs/capture.md": prepare_capture,
    "docs/records.md": prepare_records,
    "docs/versions.md": prepare_versions,
    "docs/analyze.md": prepare_analyze,
}


# ---------------------------------------------------------------- checks after a file ran
def check_capture(ns: dict) -> None:
    assert ns["connections"].num_rows == 1
    assert ns["reader"].error is not None and ns["reader"].error.category == "oversized_record"
    assert ns["frames"].num_rows == 2


def check_records(ns: dict) -> None:
    assert ns["records"].truncated_tail and len(ns["complete"]) == 1
    assert ns["table"].num_rows == 3


def check_batch(ns: dict) -> None:
    import pyarrow as pa

    from kproto.arrow.capture import read_capture

    write_pcap(Path("broker.pcap"))
    frames, _, _ = read_capture("broker.pcap")
    (paired,) = list(ns["decode"](frames.to_batches()))
    assert paired.num_rows == 1 and isinstance(paired, pa.RecordBatch)


def check_packaging(ns: dict) -> None:
    import argparse

    parser = argparse.ArgumentParser()
    ns["add_arguments"](parser)
    assert ns["run"](parser.parse_args(["some.bin"])) == 0


def check_versions(ns: dict) -> None:
    assert ns["match"].release == "3.9"


CHECK = {
    "docs/capture.md": check_capture,
    "docs/records.md": check_records,
    "docs/batch.md": check_batch,
    "docs/packaging.md": check_packaging,
    "docs/versions.md": check_versions,
}


# ---------------------------------------------------------------- running
def claimed_value(lines: list[str], statement: ast.stmt):
    """The literal a comment claims for an expression statement, or None (as a 1-tuple when there is one)."""
    last = lines[statement.end_lineno - 1]
    following = []
    for line in lines[statement.end_lineno :]:
        if not line.lstrip().startswith("#"):
            break
        following.append(line.lstrip()[1:].strip())
    inline = last[statement.end_col_offset :].strip()
    text = " ".join(following) if following else inline[1:].strip() if inline.startswith("#") else ""
    if not text:
        return None
    partial = text.endswith(", ...}")  # "{0: 11, 1: 17, ...}": these items, among others
    if partial:
        text = text[: -len(", ...}")] + "}"
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return (Partial(value) if partial else value,)


class Partial:
    """A claimed dict given with "...": equal to a dict holding at least its items."""

    def __init__(self, items: dict) -> None:
        self.items = items

    def __eq__(self, other) -> bool:
        return isinstance(other, dict) and all(
            key in other and other[key] == value for key, value in self.items.items()
        )

    def __repr__(self) -> str:
        return repr(self.items)[:-1] + ", ...}"


def run_block(block: Block, ns: dict) -> int:
    """Run one block in ``ns``; returns how many claimed values it checked."""
    where = f"{block.path}:{block.line}"
    if block.code.lstrip().startswith(">>>"):
        test = doctest.DocTestParser().get_doctest(block.code, ns, where, block.path, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test, clear_globs=False)
        assert runner.failures == 0, f"{where}: doctest failed"
        return runner.tries
    lines = block.code.splitlines()
    checked = 0
    for statement in ast.parse(block.code, where).body:
        claim = claimed_value(lines, statement) if isinstance(statement, ast.Expr) else None
        if claim is None:
            exec(compile(ast.Module([statement], []), where, "exec"), ns)
            continue
        value = eval(compile(ast.Expression(statement.value), where, "eval"), ns)
        assert value == claim[0], f"{where} line {statement.lineno}: got {value!r}, the doc claims {claim[0]!r}"
        checked += 1
    return checked


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


RUNNABLE_FILES = sorted({block.path for block in ALL_BLOCKS if block.kind == "run"})


@pytest.mark.parametrize("path", RUNNABLE_FILES)
def test_doc_blocks_run(path, in_tmp):
    ns = {"__name__": "__doc_test__"}
    ns.update(PREPARE.get(path, lambda directory: {})(in_tmp))
    for block in ALL_BLOCKS:
        if block.path == path and block.kind == "run":
            run_block(block, ns)
    if path in CHECK:
        CHECK[path](ns)


def spark_missing() -> str:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (scripts/setup.sh --spark)"
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java runtime (scripts/install-java.sh installs one)"
    return ""


SPARK_BLOCKS = [block for block in ALL_BLOCKS if block.kind == "spark"]


@pytest.mark.parametrize("block", SPARK_BLOCKS, ids=[f"{b.path}:{b.line}" for b in SPARK_BLOCKS])
def test_spark_blocks(block, in_tmp):
    reason = spark_missing()
    if reason:
        pytest.skip(reason)
    ns = {"__name__": "__doc_test__"}
    ns.update(PREPARE.get(block.path, lambda directory: {})(in_tmp))
    run_block(block, ns)


def test_every_block_is_run_or_listed():
    """Each block runs, needs Spark, or is in NOT_RUNNABLE with its reason; claims are checked somewhere."""
    skipped = {(block.path, block.reason) for block in ALL_BLOCKS if block.kind == "skip"}
    assert all(reason for _, reason in skipped), "a skip marker without a reason"
    listed = {
        (path, prefix)
        for path, reason in skipped
        for p, prefix in NOT_RUNNABLE
        if p == path and reason.startswith(prefix)
    }
    assert listed == NOT_RUNNABLE and len(skipped) == len(NOT_RUNNABLE), skipped
    assert sum(block.kind == "run" for block in ALL_BLOCKS) >= 15
    assert {"README.md", "docs/records.md", "docs/versions.md", "docs/capture.md"} <= set(RUNNABLE_FILES)


def test_claims_are_checked():
    """The claim reader finds the comments it should, so the claims above are really compared."""
    block = Block("x.md", 1, "(1 + 2, 'a')\n# (3, 'a')\nlen('ab')   # 2\nlen('abc')  # e.g. three\n", "run", "")
    assert run_block(block, {}) == 2
    wrong = Block("x.md", 1, "1 + 1   # 3\n", "run", "")
    with pytest.raises(AssertionError, match="the doc claims 3"):
        run_block(wrong, {})
    partial = Block("x.md", 1, "dict(a=1, b=2)   # {'a': 1, ...}\n", "run", "")
    assert run_block(partial, {}) == 1
    with pytest.raises(AssertionError):
        run_block(Block("x.md", 1, "dict(a=1, b=2)   # {'a': 2, ...}\n", "run", ""), {})


def test_doctest_blocks():
    assert run_block(Block("x.md", 1, ">>> x = 2\n>>> x + 1\n3\n", "run", ""), {}) == 2
    with pytest.raises(AssertionError, match="doctest failed"):
        run_block(Block("x.md", 1, ">>> 1 + 1\n3\n", "run", ""), {})
