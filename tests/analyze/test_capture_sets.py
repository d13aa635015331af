"""Capture sets without Spark: rotation names, detection from file heads, and a set read as one capture.

A capture cut at record boundaries into 2, 5 and 50 files (pcap and pcapng, wherever
the cuts fall in connections and Kafka frames) must give every table of the unsplit
capture, but for the columns that name or count the files (tests/capture_pieces.py).
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from kproto.analyze.spark import capture_sets as CS
from kproto.analyze.spark import planning as P
from tests import capture_pieces as cp
from tests import spark_captures as sc

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pcap"
TABLES = ("frames", "exchanges", "connections", "clients", "topics", "summary", "errors")


# ---------------------------------------------------------------- rotation names
@pytest.mark.parametrize(
    "name, key, index",
    [
        ("broker1_00001_20261125093000.pcapng", "broker1_*_*.pcapng", 1),  # dumpcap ring buffer
        ("broker1_00012_20261125103000.pcapng", "broker1_*_*.pcapng", 12),
        ("ring_00003_20261125093000", "ring_*_*", 3),  # ... without an extension
        ("kafka.pcap", "kafka.pcap*", 0),  # tcpdump -C: the -w name,
        ("kafka.pcap1", "kafka.pcap*", 1),  # then 1, 2, ... appended
        ("kafka.pcap17", "kafka.pcap*", 17),
        ("file", "file*", 0),
        ("file2", "file*", 2),
        ("broker1-20261125-093000.pcap", "broker1-*.pcap*", 0),  # tcpdump -G, strftime names
        ("broker1-2026-11-25_09:30:00.pcap", "broker1-*.pcap*", 0),
        ("broker2-20261125093000.pcap", "broker2-*.pcap*", 0),
        ("broker2-20261125093000.pcap3", "broker2-*.pcap*", 3),  # -G and -C together
        ("capture-1764063000.pcap", "capture-*.pcap*", 0),  # -G with %s
    ],
)
def test_rotation_key(name, key, index):
    assert CS.rotation_key(name) == (key, index)


# ---------------------------------------------------------------- detection from heads
def head(
    path: str,
    first: int | None,
    last: int | None,
    layout: str = "pcap-eth",
    fmt: str = "pcap",
    ends_on_record: bool = True,
) -> CS.FileHead:
    return CS.FileHead(path, 100, fmt, layout, first, last, ends_on_record)


def named(sets: list[CS.CaptureSet]) -> dict[str, list[str]]:
    return {s.name: [h.path for h in s.files] for s in sets}


def test_pieces_are_ordered_by_first_timestamp_not_by_name():
    heads = [
        head("/c/kafka.pcap10", 100, 109),
        head("/c/kafka.pcap", 0, 9),
        head("/c/kafka.pcap2", 20, 29),
        head("/c/kafka.pcap1", 10, 19),
    ]
    assert named(CS.detect_sets(heads)) == {
        "/c/kafka.pcap*": ["/c/kafka.pcap", "/c/kafka.pcap1", "/c/kafka.pcap2", "/c/kafka.pcap10"]
    }


def test_two_brokers_in_one_directory_stay_two_sets():
    heads = [
        head(f"/c/{broker}_{i:05d}_2026112509{i:02d}00.pcapng", i * 10 + b, i * 10 + b + 9, fmt="pcapng")
        for b, broker in enumerate(("brokerA", "brokerB"))
        for i in range(1, 4)
    ]
    assert named(CS.detect_sets(heads)) == {
        f"/c/{broker}_*_*.pcapng": [f"/c/{broker}_{i:05d}_2026112509{i:02d}00.pcapng" for i in range(1, 4)]
        for broker in ("brokerA", "brokerB")
    }


def test_one_name_pattern_but_overlapping_times_are_separate_captures():
    # Two brokers' tcpdump -G files named alike (copied into one directory), rotated 30 s apart:
    # pieces of one capture never overlap in time, so each file continues the chain it fits.
    heads = [
        head(f"/c/k-2026112509{m:02d}{s:02d}.pcap", m * 60 + s, m * 60 + s + 59) for m in range(3) for s in (0, 30)
    ]
    sets = named(CS.detect_sets(heads))
    assert sorted(sets.values()) == [
        [f"/c/k-2026112509{m:02d}00.pcap" for m in range(3)],
        [f"/c/k-2026112509{m:02d}30.pcap" for m in range(3)],
    ]
    assert sorted(sets) == ["/c/k-*.pcap* from k-20261125090000.pcap", "/c/k-*.pcap* from k-20261125090030.pcap"]


def test_a_time_gap_does_not_end_a_set_but_a_different_link_type_does():
    heads = [
        head("/c/k.pcap", 0, 9),
        head("/c/k.pcap1", 10_000, 10_009),
        head("/c/k.pcap2", 20_000, 20_009, layout="pcap-sll"),
    ]
    assert named(CS.detect_sets(heads)) == {"/c/k.pcap*": ["/c/k.pcap", "/c/k.pcap1"], "/c/k.pcap2": ["/c/k.pcap2"]}


def test_a_file_cut_mid_record_ends_its_set():
    heads = [
        head("/c/k.pcap", 0, 9),
        head("/c/k.pcap1", 10, None, ends_on_record=False),
        head("/c/k.pcap2", 30, 39),
        head("/c/k.pcap3", 40, 49),
    ]
    assert named(CS.detect_sets(heads)) == {
        "/c/k.pcap*": ["/c/k.pcap", "/c/k.pcap1"],
        "/c/k.pcap*#2": ["/c/k.pcap2", "/c/k.pcap3"],
    }


def test_frame_dumps_and_lone_files_are_sets_of_one_named_by_their_path():
    heads = [
        head("/c/dump1", None, None, layout="", fmt="frames"),
        head("/c/dump2", None, None, layout="", fmt="frames"),
        head("/c/x.pcap", 0, 1),
    ]
    assert named(CS.detect_sets(heads)) == {p: [p] for p in ("/c/dump1", "/c/dump2", "/c/x.pcap")}


def test_detection_off_and_sets_named_explicitly():
    heads = [
        head("/c/k.pcap", 0, 9),
        head("/c/k.pcap1", 10, 19),
        head("/c/morning.cap", 30, 39),
        head("/c/evening.cap", 40, 49),
    ]
    assert named(CS.detect_sets(heads, automatic=False)) == {h.path: [h.path] for h in heads}
    assert named(CS.detect_sets(heads, automatic=False, named=[("day", "*.cap")])) == {
        "/c/k.pcap": ["/c/k.pcap"],
        "/c/k.pcap1": ["/c/k.pcap1"],
        "day": ["/c/morning.cap", "/c/evening.cap"],
    }
    assert named(CS.detect_sets(heads, named=[("day", "/c/*ing.cap")])) == {
        "/c/k.pcap*": ["/c/k.pcap", "/c/k.pcap1"],
        "day": ["/c/morning.cap", "/c/evening.cap"],
    }
    uris = [head("hdfs://nn/c/morning.cap", 30, 39), head("file:/c/evening.cap", 40, 49)]
    assert named(CS.detect_sets(uris, named=[("day", "/c/*.cap")])) == {"day": [h.path for h in uris]}
    with pytest.raises(CS.CaptureSetError, match="no input file matches"):
        CS.detect_sets(heads, named=[("night", "*.pcapng")])
    with pytest.raises(CS.CaptureSetError, match="not pieces of one"):
        CS.detect_sets(heads + [head("/c/noon.cap", 35, 36, layout="pcap-sll")], named=[("day", "*.cap")])


# ---------------------------------------------------------------- heads read from files
def test_heads_of_pcap_and_pcapng_pieces(tmp_path):
    data = SAMPLE.read_bytes()
    pcaps = cp.write_pieces(tmp_path, ["a.pcap", "a.pcap1"], cp.cut_pcap(data, 2))
    pcapngs = cp.write_pieces(tmp_path, ["b.pcapng", "b.pcapng1"], cp.cut_pcap_as_pcapng(data, 2))
    _header, records = cp.pcap_records(data)
    first = [
        struct.unpack_from("<II", r)
        for r in (records[0], records[len(records) // 2 - 1], records[len(records) // 2], records[-1])
    ]
    ts = [s * 1_000_000_000 + us * 1000 for s, us in first]
    for paths, fmt in ((pcaps, "pcap"), (pcapngs, "pcapng")):
        heads = [P.file_head(str(p), p.stat().st_size) for p in paths]
        assert [(h.format, h.first_ts_ns, h.last_ts_ns, h.ends_on_record) for h in heads] == [
            (fmt, ts[0], ts[1], True),
            (fmt, ts[2], ts[3], True),
        ]
        assert heads[0].layout == heads[1].layout
    # A pcap cut mid-record, small (walked from its header) and large (its last megabyte searched).
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-5])
    assert not P.file_head(str(cut), cut.stat().st_size).ends_on_record
    big = sc.big_capture(connections=4, exchanges=1000)
    assert len(big) > CS.TAIL_BYTES + 100_000
    for body, complete in ((big, True), (big[:-7], False)):
        cut.write_bytes(body)
        assert P.file_head(str(cut), len(body)).ends_on_record is complete
    cut.write_bytes(cp.cut_pcap_as_pcapng(data, 1)[0][:-8])
    assert not P.file_head(str(cut), cut.stat().st_size).ends_on_record


# ---------------------------------------------------------------- a set read as one capture
@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """The sample, and a capture whose Produce requests span two packets each (a cut can fall inside a frame)."""
    directory = tmp_path_factory.mktemp("unsplit")
    (directory / "spanning.pcap").write_bytes(sc.big_capture(connections=3, exchanges=10))
    return {"sample": SAMPLE, "spanning": directory / "spanning.pcap"}


@pytest.fixture(scope="module")
def unsplit(captures):
    return {name: cp.analysed(P.plan_file(str(path), 0)) for name, path in captures.items()}


def _set_split(paths: list[Path], fmt: str) -> P.Split:
    heads = [P.file_head(str(p), p.stat().st_size) for p in paths]
    (found,) = CS.detect_sets(heads)
    assert [h.path for h in found.files] == [str(p) for p in paths]
    return P.plan_set(found.name, [(h.path, h.size) for h in found.files], fmt)


@pytest.mark.parametrize("capture", ["sample", "spanning"])
@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
@pytest.mark.parametrize("pieces", [2, 5, 50])
def test_a_capture_cut_into_pieces_gives_the_unsplit_tables(tmp_path, captures, unsplit, capture, fmt, pieces):
    data = captures[capture].read_bytes()
    cut = cp.cut_pcap(data, pieces) if fmt == "pcap" else cp.cut_pcap_as_pcapng(data, pieces)
    paths = cp.write_pieces(tmp_path, cp.dumpcap_names(capture, pieces, "." + fmt), cut)
    tables = cp.analysed([_set_split(paths, fmt)])
    drop = cp.NAMING_COLUMNS + (("format",) if fmt == "pcapng" else ())  # pcapng pieces of a pcap
    for name in TABLES:
        assert cp.table_rows(tables[name], drop) == cp.table_rows(unsplit[capture][name], drop), name
    (row, total) = tables["summary"].to_pylist()
    assert row["capture"] == str(tmp_path / f"{capture}_*_*.{fmt}") and row["files"] == pieces and row["accounted"]
    # Every file's bytes are counted once: its header (each piece has one) and its records.
    assert row["file_bytes"] == row["record_bytes"] == sum(len(c) for c in cut)
    assert (row["gap_bytes"], row["tail_bytes"], row["skipped_bytes"]) == (0, 0, 0)
    assert set(tables["frames"]["capture"].to_pylist()) == {row["capture"]}


def test_pieces_read_alone_are_the_old_per_file_behaviour(tmp_path, captures, unsplit):
    paths = cp.write_pieces(
        tmp_path, cp.tcpdump_size_names("spanning.pcap", 7), cp.cut_pcap(captures["spanning"].read_bytes(), 7)
    )
    tables = cp.analysed([s for p in paths for s in P.plan_file(str(p), 0)])
    total = tables["summary"].to_pylist()[-1]
    whole = unsplit["spanning"]["summary"].to_pylist()[-1]
    assert total["files"] == 7 and total["accounted"]
    # Connections cut by a file boundary count as new ones, and their exchanges as unpaired.
    assert total["connections"] > whole["connections"] == 3
    assert total["exchanges_paired"] < whole["exchanges_paired"] == 30


def _with_bad_record(tmp_path) -> tuple[list[Path], list[bytes], int]:
    """Three tcpdump -C pieces of the sample, the second's second record claiming 2 GiB."""
    pieces = cp.cut_pcap(SAMPLE.read_bytes(), 3)
    header, records = cp.pcap_records(pieces[1])
    bad = records[1][:8] + struct.pack("<II", 0x7FFFFFFF, 0x7FFFFFFF) + records[1][16:]
    pieces[1] = header + records[0] + bad + b"".join(records[2:])
    return cp.write_pieces(tmp_path, cp.tcpdump_size_names("k.pcap", 3), pieces), pieces, 24 + len(records[0])


def test_a_corrupt_file_ends_its_set_and_the_next_file_is_read_on_its_own(tmp_path):
    paths, pieces, offset = _with_bad_record(tmp_path)
    sets = CS.detect_sets([P.file_head(str(p), p.stat().st_size) for p in paths])
    assert named(sets) == {str(tmp_path / "k.pcap*"): [str(p) for p in paths[:2]], str(paths[2]): [str(paths[2])]}


def test_reading_stopped_in_a_middle_file_names_that_file_and_the_rest_of_the_set(tmp_path):
    # A set planned whole (the corruption was past the part of the file its head check reads).
    paths, pieces, offset = _with_bad_record(tmp_path)
    tables = cp.analysed([P.plan_set("k", [(str(p), p.stat().st_size) for p in paths], "pcap")])
    errors = cp.input_errors(tables["errors"])
    assert [(e["file"], e["category"], e["offset"], e["unread_bytes"]) for e in errors] == [
        (str(paths[1]), "oversized_record", offset, len(pieces[1]) - offset),
        (str(paths[2]), "oversized_record", 0, len(pieces[2])),
    ]
    assert errors[1]["reason"].startswith(
        f"not read: reading its capture set stopped in {paths[1]} at byte offset {offset} ("
    )
    (row, _total) = tables["summary"].to_pylist()
    assert row["accounted"] and row["errors"] == 2 and row["files"] == 3
    assert row["unread_bytes"] == len(pieces[1]) - offset + len(pieces[2])
    assert row["file_bytes"] == row["record_bytes"] + row["unread_bytes"] == sum(map(len, pieces))


def test_an_incomplete_last_record_belongs_to_the_last_file(tmp_path):
    pieces = cp.cut_pcap(SAMPLE.read_bytes(), 3)
    pieces[2] = pieces[2][:-10]
    paths = cp.write_pieces(tmp_path, cp.tcpdump_size_names("k.pcap", 3), pieces)
    tables = cp.analysed([_set_split(paths, "pcap")])
    (error,) = cp.input_errors(tables["errors"])
    assert (error["file"], error["category"], error["offset"]) == (
        str(paths[2]),
        "truncated_record",
        len(pieces[2]) - error["unread_bytes"],
    )
    assert tables["summary"].to_pylist()[0]["accounted"]


def test_cli_help_names_the_capture_set_options():
    output = subprocess.run(
        [sys.executable, "-m", "kproto.analyze.cli", "analyze", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--capture-set NAME=GLOB" in output and "--no-capture-sets" in output


def test_cli_capture_set_arguments():
    import argparse

    from kproto.analyze.cli_analyze import add_arguments, apply_capture_set_arguments
    from kproto.analyze.spark import Options

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = Options()
    apply_capture_set_arguments(
        parser.parse_args(
            ["x", "--out", "o", "--capture-set", "a=*.cap", "--capture-set", "b=/d/b-*", "--no-capture-sets"]
        ),
        options,
    )
    assert (options.named_sets, options.capture_sets) == ((("a", "*.cap"), ("b", "/d/b-*")), False)
    with pytest.raises(ValueError, match="expected NAME=GLOB"):
        apply_capture_set_arguments(parser.parse_args(["x", "--out", "o", "--capture-set", "nameless"]), options)


@pytest.mark.parametrize("fmt", ["pcap", "pcapng"])
def test_files_read_in_pieces_not_mapped_give_the_same_tables(tmp_path, monkeypatch, captures, unsplit, fmt):
    # Files behind a URI (hdfs:, s3a:) are read a piece at a time: records cut by a piece carry over.
    from kproto.analyze.spark import set_reader

    class Unmapped(P._Source):
        @property
        def mapped(self) -> bool:
            return False

    monkeypatch.setattr(set_reader, "_Source", Unmapped)
    monkeypatch.setattr(set_reader, "_PIECE", 1000)
    data = captures["spanning"].read_bytes()
    cut = cp.cut_pcap(data, 5) if fmt == "pcap" else cp.cut_pcap_as_pcapng(data, 5)
    tables = cp.analysed([_set_split(cp.write_pieces(tmp_path, cp.dumpcap_names("s", 5, "." + fmt), cut), fmt)])
    drop = cp.NAMING_COLUMNS + ("format",)
    for name in TABLES:
        assert cp.table_rows(tables[name], drop) == cp.table_rows(unsplit["spanning"][name], drop), name


def test_a_record_cut_by_a_file_end_the_head_check_missed_is_a_row(tmp_path):
    # Planned whole (as if the cut were beyond what the head check reads): the record runs on into
    # the next file; its file says so, and every file's bytes are still counted in that file.
    pieces = cp.cut_pcap(SAMPLE.read_bytes(), 3)
    carried = len(cp.pcap_records(pieces[1])[1][-1]) - 10  # what is left of its last record
    pieces[1] = pieces[1][:-10]
    paths = cp.write_pieces(tmp_path, cp.tcpdump_size_names("k.pcap", 3), pieces)
    tables = cp.analysed([P.plan_set("k", [(str(p), p.stat().st_size) for p in paths], "pcap")])
    errors = cp.input_errors(tables["errors"])
    # (The reader, out of step after the cut record, may find more problems in the next file.)
    assert [(e["file"], e["category"], e["offset"], e["unread_bytes"]) for e in errors][0] == (
        str(paths[1]),
        "truncated_record",
        len(pieces[1]) - carried,
        0,
    )
    assert "read on into the next file of its capture set" in errors[0]["reason"]
    (row, _total) = tables["summary"].to_pylist()
    assert row["file_bytes"] == sum(map(len, pieces)) and row["accounted"]


def test_a_file_of_a_set_that_cannot_be_opened_is_a_row_and_the_others_are_read(tmp_path):
    paths = cp.write_pieces(tmp_path, cp.dumpcap_names("s", 3), cp.cut_pcap(SAMPLE.read_bytes(), 3))
    split = P.plan_set("s", [(str(p), p.stat().st_size) for p in paths], "pcap")
    size = paths[1].stat().st_size
    paths[1].unlink()
    tables = cp.analysed([split])
    (error,) = [e for e in cp.input_errors(tables["errors"]) if e["category"] == "read_failed"]
    assert (error["file"], error["offset"], error["unread_bytes"]) == (str(paths[1]), 0, size)
    (row, _total) = tables["summary"].to_pylist()
    assert row["files"] == 3 and row["unread_bytes"] == size and row["accounted"] and row["frames"] > 0


def test_a_set_named_explicitly_keeps_its_name_with_one_file():
    heads = [head("/c/k.pcap", 0, 9), head("/c/noon.cap", 30, 39)]
    assert named(CS.detect_sets(heads, named=[("noon", "*.cap")])) == {
        "/c/k.pcap": ["/c/k.pcap"],
        "noon": ["/c/noon.cap"],
    }


def test_planning_a_run_of_sets_named_sets_and_lone_files(tmp_path):
    from types import SimpleNamespace

    pytest.importorskip("pyspark", reason="kproto.analyze.spark.inputs imports pyspark")
    from kproto.analyze.spark import inputs

    sample = SAMPLE.read_bytes()
    cp.write_pieces(tmp_path, cp.dumpcap_names("brokerA", 3), cp.cut_pcap(sample, 3))
    cp.write_pieces(tmp_path, ["noon.cap", "other.pcap"], [sample, sample])
    files = sorted((str(p), p.stat().st_size) for p in tmp_path.iterdir())
    local = SimpleNamespace(sparkContext=SimpleNamespace(master="local[2]"))  # the driver reads the heads

    def plan(**options):
        return sorted(
            (s.capture, [path for path, _ in json.loads(s.set_files)] if s.set_files else s.path)
            for s in inputs.plan_splits(local, inputs.Inputs(files), split_bytes=1 << 20, overlap_bytes=0, **options)
        )

    pieces = [str(tmp_path / name) for name in cp.dumpcap_names("brokerA", 3)]
    noon, other = str(tmp_path / "noon.cap"), str(tmp_path / "other.pcap")
    assert plan(named_sets=(("noon", "noon.cap"),)) == sorted(
        [(str(tmp_path / "brokerA_*_*.pcap"), pieces), ("noon", noon), (other, other)]
    )
    assert plan(capture_sets=False) == sorted((path, path) for path, _ in files)
    assert plan(capture_sets=False, named_sets=(("a", "brokerA_*"),)) == sorted(
        [("a", pieces), (noon, noon), (other, other)]
    )


def test_the_figure_in_the_docs_is_what_its_script_prints():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import capture_sets_figure

    docs = (Path(__file__).resolve().parents[2] / "docs" / "analyze.md").read_text()
    shown = docs.split("<!-- capture-sets-figure -->\n", 1)[1].split("\n<!-- /capture-sets-figure -->", 1)[0]
    assert shown == capture_sets_figure.figure()
    rows = [line.split(" | ") for line in shown.splitlines()[2:]]
    assert all(row[3] == "7 of 7" for row in rows if row[2] in ("one file", "one capture set"))
    assert all(row[3] != "7 of 7" for row in rows if row[2] == "files alone")


def test_pieces_with_another_snaplen_link_type_or_format_are_not_one_capture(tmp_path):
    pieces = cp.cut_pcap(SAMPLE.read_bytes(), 4)
    pieces[1] = pieces[1][:16] + struct.pack("<I", 1500) + pieces[1][20:]  # another snaplen
    pieces[2] = pieces[2][:20] + struct.pack("<I", 113) + pieces[2][24:]  # Linux cooked capture
    pieces[3] = cp.cut_pcap_as_pcapng(pieces[3], 1)[0]  # pcapng
    paths = cp.write_pieces(tmp_path, cp.tcpdump_size_names("k.pcap", 4), pieces)
    sets = CS.detect_sets([P.file_head(str(p), p.stat().st_size) for p in paths])
    assert named(sets) == {str(p): [str(p)] for p in paths}


def test_files_given_as_file_uris_are_named_by_their_paths(tmp_path):
    # On a cluster Spark lists files as file: URIs; the tables name them as local mode does.
    pieces = cp.cut_pcap(SAMPLE.read_bytes(), 2)
    pieces[1] = pieces[1][:-10]
    paths = cp.write_pieces(tmp_path, cp.tcpdump_size_names("k.pcap", 2), pieces)
    uris = [(p.as_uri(), p.stat().st_size) for p in paths]
    for splits in ([P.plan_set("k", uris, "pcap")], P.plan_file(uris[1][0], 0, capture=str(paths[1]))):
        (error,) = cp.input_errors(cp.analysed(splits)["errors"])
        assert (error["file"], error["category"]) == (str(paths[1]), "truncated_record")


def test_cli_a_set_that_cannot_be_one_capture_is_a_usage_error(monkeypatch, capsys, tmp_path):
    pytest.importorskip("pyspark", reason="kproto analyze needs pyspark")
    import argparse

    monkeypatch.chdir(tmp_path)
    (tmp_path / "caps").mkdir()  # the inputs are checked before Spark starts: they must exist
    from types import SimpleNamespace

    import kproto.analyze.spark
    from kproto.analyze import cli_analyze

    def refuse(*args, **kwargs):
        raise CS.CaptureSetError("capture set day: a.cap, b.cap are not pieces of one pcap or pcapng capture")

    monkeypatch.setattr(
        kproto.analyze.spark,
        "spark_session",
        lambda *a, **k: SimpleNamespace(sparkContext=SimpleNamespace(setLogLevel=lambda level: None)),
    )
    monkeypatch.setattr(kproto.analyze.spark, "analyze", refuse)
    parser = argparse.ArgumentParser()
    cli_analyze.add_arguments(parser)
    assert (
        cli_analyze.run(parser.parse_args(["caps", "--out", "o", "--capture-set", "day=*.cap"]))
        == cli_analyze.EXIT_USAGE
    )
    assert "are not pieces of one pcap or pcapng capture" in capsys.readouterr().err
    assert cli_analyze.run(parser.parse_args(["caps", "--out", "o", "--capture-set", "day"])) == cli_analyze.EXIT_USAGE
    assert "expected NAME=GLOB" in capsys.readouterr().err


def test_a_source_closes_while_a_view_of_its_map_is_alive(tmp_path):
    """A reader failure's traceback may hold views of the mapped file when the task closes it:
    closing must not raise (that would replace the row naming the failure with a task crash)."""
    path = tmp_path / "capture.pcap"
    path.write_bytes(bytes(range(256)) * 64)
    source = P._Source(str(path))
    assert source.mapped
    view = source.view(16, 32)
    source.close()
    assert bytes(view[:4]) == bytes(range(16, 20))  # the map lives on for the view
    del view
