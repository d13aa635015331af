"""The API review's decisions (docs/decisions/api-review.md) hold in the code: one default per limit,
one return type per kind of result, and old names that warn for one release."""

from __future__ import annotations

import importlib
import inspect
import re
import warnings
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

import kproto.arrow.frames as kb  # noqa: E402
from kproto import framing, limits  # noqa: E402
from kproto.analyze import dump  # noqa: E402
from kproto.arrow import capture, exchanges  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "samples" / "sample.pcap"


def _max_frame_size_defaults() -> dict[str, int]:
    found = {}
    for module in (framing, capture, kb, exchanges, dump):
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module.__name__ or not callable(obj):
                continue
            try:
                parameters = inspect.signature(obj).parameters
            except (TypeError, ValueError):
                continue
            if "max_frame_size" in parameters:
                found[f"{module.__name__}.{name}"] = parameters["max_frame_size"].default
    return found


def test_every_frame_reader_defaults_to_the_one_limit() -> None:
    defaults = _max_frame_size_defaults()
    # The readers docs/decisions/api-review.md names, at least: a reader that lost its parameter fails here.
    for name in (
        "kproto.framing.FrameReader",
        "kproto.framing.iter_frames",
        "kproto.arrow.capture.CaptureReader",
        "kproto.arrow.capture.read_frame_file",
        "kproto.arrow.frames.decode_frames",
        "kproto.arrow.exchanges.pair",
        "kproto.arrow.frames.partitions",
        "kproto.arrow.frames.decode_struct_column",
    ):
        assert name in defaults, name
    assert set(defaults.values()) == {limits.DEFAULT_MAX_FRAME_SIZE}, defaults
    assert framing.DEFAULT_MAX_FRAME_SIZE is limits.DEFAULT_MAX_FRAME_SIZE


@pytest.mark.parametrize("old_module", ["kproto.batch", "kproto.capture"])
def test_old_frame_size_names_warn_and_give_the_one_value(old_module) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the module's own warning: tests/project/test_old_paths.py
        module = importlib.import_module(old_module)
    with pytest.warns(DeprecationWarning, match=r"DEFAULT_MAX_FRAME_SIZE is deprecated.*kproto\.limits"):
        assert module.DEFAULT_MAX_FRAME_SIZE == limits.DEFAULT_MAX_FRAME_SIZE
    with pytest.raises(AttributeError):
        module.NO_SUCH_NAME  # noqa: B018


def test_docs_api_lists_the_deprecated_names_that_exist() -> None:
    text = (ROOT / "docs" / "decisions" / "api-review.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"`(kproto\.(?:batch|capture)\.DEFAULT_MAX_FRAME_SIZE)`", text))
    assert listed == {"kproto.batch.DEFAULT_MAX_FRAME_SIZE", "kproto.capture.DEFAULT_MAX_FRAME_SIZE"}
    for name in listed:
        module_name, attribute = name.rsplit(".", 1)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            getattr(importlib.import_module(module_name), attribute)
        assert DeprecationWarning in [w.category for w in caught]


def test_return_types_follow_docs_api() -> None:
    result = capture.read_capture(str(SAMPLE))
    assert isinstance(result, capture.Capture)
    frames, connections, counters = result  # still a 3-tuple
    assert result.frames is frames and result.counters is counters
    assert isinstance(frames, pa.Table) and isinstance(connections, pa.Table) and isinstance(counters, dict)
    assert all(isinstance(b, pa.RecordBatch) for b in capture.CaptureReader(str(SAMPLE)))
    assert isinstance(exchanges.pair(frames), pa.Table)
    assert isinstance(kb.partitions(frames["payload"], directions=frames["direction"]), pa.Table)
    assert isinstance(kb.decode_frames(frames["payload"], directions=frames["direction"]), pa.RecordBatch)


@pytest.mark.parametrize("short, kafka", [("api_key", "request_api_key"), ("api_version", "request_api_version")])
def test_request_header_short_names_warn_at_the_callers_line(short, kafka) -> None:
    import kproto

    header = kproto.RequestHeader(request_api_key=3, request_api_version=12, correlation_id=7, client_id="c")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = getattr(header, short)
    assert value == getattr(header, kafka)
    [warning] = caught
    assert warning.category is DeprecationWarning
    assert str(warning.message) == (
        f"RequestHeader.{short} is deprecated and will be removed in the next release; use RequestHeader.{kafka}"
    )
    assert warning.filename == __file__  # the caller's line, in both implementations


def test_records_records_is_a_list_as_a_batchs_is(impl) -> None:
    R = impl.load("records")
    first = R.RecordBatch.encode([R.Record(value=b"a"), R.Record(value=b"b")], base_offset=0)
    second = R.RecordBatch.encode([R.Record(value=b"c")], base_offset=2)
    records = R.Records(first + second)
    listed = records.records()
    assert isinstance(listed, list) and isinstance(R.RecordBatch(first).records(), list)
    assert [(r.offset, r.value) for r in listed] == [(0, b"a"), (1, b"b"), (2, b"c")]
    assert [r.value for batch in records.batches() for r in batch.records()] == [b"a", b"b", b"c"]
