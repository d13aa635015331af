"""kproto analyze end to end on a local Spark: exact table contents on small captures.

One Spark session for the whole run (local[2], UI off, quiet logs), one analysis
of three inputs: a small pcap decoded whole, a pcap cut into ranges (the raw /
grouping path) and a Parquet table of frames.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (scripts/setup.sh --spark)")
if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
    pytest.skip("no Java runtime (scripts/install-java.sh installs one)", allow_module_level=True)

import pyarrow as pa  # noqa: E402
import pyarrow.compute  # noqa: E402,F401
import pyarrow.parquet as pq  # noqa: E402

from kproto.analyze.spark import Options, analyze  # noqa: E402
from kproto.analyze.spark import planning as P  # noqa: E402
from kproto.arrow.capture import read_capture  # noqa: E402
from tests import spark_captures as sc  # noqa: E402

pytestmark = pytest.mark.spark

LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    log4j = tmp_path_factory.mktemp("spark") / "log4j2.properties"
    log4j.write_text(LOG4J)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kproto tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile=file:{log4j}")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="module")
def analysis(spark, tmp_path_factory):
    data = tmp_path_factory.mktemp("inputs")
    small = data / "small.pcap"
    small.write_bytes(sc.small_capture())
    big = data / "big.pcap"
    big.write_bytes(sc.big_capture(connections=4, exchanges=30))
    # The small capture's frames again, as a Parquet table under another capture name.
    frames, _connections, _counters = read_capture(str(small), name="from-parquet")
    pq.write_table(frames, data / "frames.parquet")
    out = tmp_path_factory.mktemp("out")
    result = analyze(
        [str(small), str(big), str(data / "frames.parquet")],
        str(out),
        spark=spark,
        options=Options(split_bytes=16_000, overlap_bytes=8_000),
        progress=False,
    )
    return result, out, str(small), str(big)


@pytest.fixture(scope="module")
def spark_combined(spark, analysis, tmp_path_factory):
    """The same inputs with the compact rows combined by Spark SQL instead of in the driver."""
    _result, _out, small, big = analysis
    data = os.path.dirname(small)
    out = tmp_path_factory.mktemp("out-spark")
    analyze(
        [small, big, os.path.join(data, "frames.parquet")],
        str(out),
        spark=spark,
        options=Options(split_bytes=16_000, overlap_bytes=8_000, driver_rows=0, report=False),
        progress=False,
    )
    return out


def _table(out, name):
    return pq.read_table(out / name)


def test_summary_accounts_for_every_frame(analysis):
    result, out, small, big = analysis
    rows = {r["capture"]: r for r in _table(out, "summary").to_pylist()}
    assert set(rows) == {small, big, "from-parquet", "*"}
    assert all(r["accounted"] for r in rows.values())
    s = rows[small]
    assert (
        s["format"],
        s["splits"],
        s["connections"],
        s["frames"],
        s["frames_ok"],
        s["frames_undecodable"],
        s["exchanges_paired"],
        s["no_response_expected"],
        s["unpaired_requests"],
        s["unpaired_responses"],
    ) == ("pcap", 1, 2, 10, 8, 2, 3, 1, 2, 1)
    b = rows[big]
    assert b["splits"] > 1
    assert (b["connections"], b["frames"], b["frames_ok"], b["exchanges_paired"], b["unpaired_requests"]) == (
        4,
        240,
        240,
        120,
        0,
    )
    p = rows["from-parquet"]
    assert (p["frames"], p["exchanges_paired"], p["unpaired_responses"]) == (10, 3, 1)
    assert rows["*"]["frames"] == 10 + 240 + 10
    assert result.summary[-1]["capture"] == "*"


def test_exchanges_table(analysis):
    _result, out, small, _big = analysis
    table = _table(out, "exchanges").to_pylist()
    mine = sorted(
        (r for r in table if r["capture"] == small),
        key=lambda r: (r["connection_id"], r["request_sequence"] is None, r["request_sequence"] or 0),
    )
    assert [
        (
            r["connection_id"],
            r["api_key"],
            r["api_version"],
            r["pair_status_name"],
            r["error_code"],
            r["latency_ns"],
            r["request_size"],
            r["response_size"],
        )
        for r in mine
    ] == [
        (0, 18, 3, "PAIRED", 0, 1_000_000, 29, 439),
        (0, 0, 9, "PAIRED", 0, 3_000_000, 142, 53),
        (0, 3, 12, "UNPAIRED_REQUEST", None, None, 19, None),
        (1, 18, 3, "PAIRED", 42, 1_000_000, 28, 12),
        (1, 0, 2, "NO_RESPONSE_EXPECTED", None, None, 144, None),
        (1, 999, 0, "UNPAIRED_REQUEST", None, None, 19, None),
        (1, None, None, "UNPAIRED_RESPONSE", None, None, None, 6),
    ]


def test_frames_table(analysis):
    _result, out, small, _big = analysis
    frames = [r for r in _table(out, "frames").to_pylist() if r["capture"] == small]
    assert len(frames) == 10
    by_key = {(r["connection_id"], r["direction"], r["sequence"]): r for r in frames}
    # the shape of to_dict(): every field of the message (ApiVersions v5's cluster_id and
    # node_id, absent in v3, at their defaults)
    assert by_key[(0, 0, 0)]["body"] == (
        '{"client_software_name":"shop-app","client_software_version":"2.0","cluster_id":null,"node_id":-1}'
    )
    assert by_key[(1, 0, 2)]["status_name"] == "UNKNOWN_API" and by_key[(1, 0, 2)]["body"] is None
    assert by_key[(1, 0, 1)]["removed_in_4x"] is True and by_key[(1, 0, 1)]["api_version"] == 2
    assert by_key[(0, 1, 1)]["api_key"] == 0  # a response carries its request's API


def test_clients_table(analysis):
    _result, out, _small, _big = analysis
    clients = {(r["client_ip"], r["client_id"]): r for r in _table(out, "clients").to_pylist()}
    shop = clients[("10.0.0.1", "shop")]
    assert (
        shop["client_software_name"],
        shop["client_software_version"],
        shop["connections"],
        shop["requests"],
        shop["apis"],
        shop["removed_in_4x_requests"],
    ) == ("shop-app", "2.0", 1, 3, ["Produce v9", "Metadata v12", "ApiVersions v3"], 0)
    # The fingerprint columns: a KIP-511 name wins (kproto.analyze.fingerprint); api_order is apis by first use.
    assert (shop["likely_software"], shop["likely_versions"], shop["fingerprint_confidence"]) == (
        "shop-app",
        "2.0",
        "KIP-511",
    )
    assert sorted(shop["api_order"]) == sorted(shop["apis"]) and shop["api_order"][0] == "ApiVersions v3"
    old = clients[("10.0.0.2", "old")]
    assert (old["client_software_name"], old["requests"], old["removed_in_4x_requests"], old["error_responses"]) == (
        "bad name",
        3,
        1,
        1,
    )
    assert old["apis"] == ["Produce v2", "ApiVersions v3", "UNKNOWN(999) v0"]
    # Split-file clients: one per connection address, all found.
    assert sorted(k[1] for k in clients if (k[0] or "").startswith("10.1.0.")) == [f"bulk-{i}" for i in range(4)]
    # The Parquet input has no connection table: its clients have no address.
    assert (None, "shop") in clients


def test_topics_table(analysis):
    _result, out, _small, _big = analysis
    topics = {(r["topic"], r["partition"]): r for r in _table(out, "topics").to_pylist()}
    orders = topics[("orders", 0)]
    assert (orders["produce_requests"], orders["produce_records"], orders["produce_bytes"], orders["compression"]) == (
        2,
        6,
        206,
        "none",
    )  # the small capture twice (pcap + Parquet)
    assert (topics[("audit", 1)]["produce_records"], topics[("audit", 1)]["compression"]) == (4, "gzip")
    bulk = sum(topics[("bulk", p)]["produce_requests"] for p in range(3))
    assert bulk == 120 and sum(topics[("bulk", p)]["produce_records"] for p in range(3)) == 600


def test_report(analysis):
    _result, out, _small, _big = analysis
    facts = json.loads((out / "report.json").read_text())
    readiness = facts["readiness"]
    assert readiness["removed_in_4x_requests"] == 2  # Produce v2 from "old", pcap and Parquet
    assert readiness["clients_sending_removed_versions"] == 2
    # The Parquet input has frames but no connection addresses.
    assert [(b["broker"], b["release"]) for b in facts["brokers"]] == [
        ("(address unknown)", "3.9"),
        ("10.0.0.9:9092", "3.9"),
    ]
    invalid = facts["invalid_software_names"]
    assert [(r["client_software_name"], r["broker_answer"]) for r in invalid] == [("bad name", "INVALID_REQUEST")] * 2
    assert {(r["status_name"], r["frames"]) for r in facts["undecodable_frames"]} == {
        ("UNKNOWN_API", 2),
        ("NO_REQUEST_INFO", 2),
    }
    latency = {r["api_name"]: r for r in facts["latency"]}
    assert latency["ApiVersions"]["p50_ms"] == 1.0 and latency["Produce"]["exchanges"] == 122
    html = (out / "report.html").read_text()
    assert "<svg" in html and "Kafka 4.x readiness" in html and "Not ready for Kafka 4.x" in html
    assert "## Kafka 4.x readiness (KIP-896)" in (out / "report.md").read_text()


def test_report_fits_the_page_in_a_browser(analysis):
    from tests.analyze.test_report_browser import screenshot_tool

    if screenshot_tool.browser() is None:
        pytest.skip("no headless Chromium (scripts/install-browser.sh installs one)")
    _result, out, _small, _big = analysis
    assert screenshot_tool.main([str(out / "report.html"), "--png", str(out / "report.png")]) == 0
    assert (out / "report.png").stat().st_size > 50_000


def test_cli_help_lists_analyze():
    output = subprocess.run(
        [sys.executable, "-m", "kproto.analyze.cli", "analyze", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--broker-port" in output and "--master" in output


@pytest.mark.parametrize("name", ["connections", "clients", "topics", "summary", "frames", "exchanges"])
def test_driver_and_spark_combine_alike(analysis, spark_combined, name):
    _result, out, _small, _big = analysis

    def rows(directory):
        table = _table(directory, name)
        return table.schema, sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())

    driver_schema, driver_rows = rows(out)
    spark_schema, spark_rows = rows(spark_combined)
    assert [(f.name, f.type) for f in driver_schema] == [(f.name, f.type) for f in spark_schema]
    assert driver_rows == spark_rows


# ---------------------------------------------------------------- messy inputs
@pytest.fixture(scope="module")
def messy(tmp_path_factory):
    """A directory of good pcaps, one whose last record claims 4 GiB, a text file and a cut frame dump."""
    import struct

    data = tmp_path_factory.mktemp("messy")
    good = sc.small_capture()
    (data / "a-good.pcap").write_bytes(good)
    (data / "b-good.pcap").write_bytes(sc.big_capture(connections=2, exchanges=5))
    (data / "c-bad.pcap").write_bytes(good + struct.pack("<IIII", 1_700_000_100, 0, 0xFFFFFFFF, 0xFFFFFFFF))
    (data / "d-notes.pcap").write_text("These are my notes, not a capture.\n" * 20)
    return data, len(good)


def test_a_bad_file_in_a_directory_is_a_row_not_a_failed_run(spark, messy, tmp_path):
    data, good_size = messy
    out = tmp_path / "out"
    result = analyze([str(data)], str(out), spark=spark, progress=False)
    from tests import capture_pieces as cp

    errors = cp.input_errors(_table(out, "errors"))  # (and each lossy connection's stream_loss rows)
    assert [(os.path.basename(e["capture"]), e["category"], e["offset"]) for e in errors] == [
        ("c-bad.pcap", "oversized_record", good_size),
        ("d-notes.pcap", "not_a_capture", 0),
    ]
    assert result.errors == errors and not result.complete
    summary = {os.path.basename(r["capture"]): r for r in _table(out, "summary").to_pylist()}
    assert summary["c-bad.pcap"]["frames"] == summary["a-good.pcap"]["frames"] == 10
    assert summary["b-good.pcap"]["frames"] == 20 and summary["b-good.pcap"]["errors"] == 0
    assert all(r["accounted"] for r in summary.values())
    assert summary["*"]["unread_bytes"] == 16 + (data / "d-notes.pcap").stat().st_size
    report_md = (out / "report.md").read_text()
    assert report_md.index("## Inputs not read completely") < report_md.index("## Captures and accounting")
    assert "c-bad.pcap | oversized_record" in report_md


def test_cli_exit_status_and_console_name_the_bad_inputs(messy, tmp_path):
    data, good_size = messy
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "kproto.analyze.cli",
            "analyze",
            str(data),
            "--out",
            str(tmp_path / "o"),
            "--master",
            "local[1]",
            "--quiet",
            "--no-report",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 3, run.stderr
    assert f"c-bad.pcap: byte offset {good_size:,}: oversized_record: pcap record with captured length" in run.stderr
    assert "d-notes.pcap: byte offset 0: not_a_capture" in run.stderr
    assert "Traceback" not in run.stderr and "BrokenPipe" not in run.stderr
    # --fail-fast: the run stops and says which file, where and why.
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "kproto.analyze.cli",
            "analyze",
            str(data / "c-bad.pcap"),
            "--out",
            str(tmp_path / "f"),
            "--master",
            "local[1]",
            "--quiet",
            "--fail-fast",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert run.returncode == 1
    assert f"c-bad.pcap: byte offset {good_size}: pcap record with captured length 4294967295" in run.stderr


def test_report_facts_alike_from_spark_and_from_pyarrow(spark, analysis):
    """The driver's pyarrow facts (small runs) and the Spark queries' facts (large runs) are the same."""
    from kproto.analyze.spark import jobs, report

    result, out, _small, _big = analysis
    written = {name: str(out / name) for name in ("frames", "exchanges", "connections", "clients", "topics")}
    by_spark = report.collect_facts(spark, jobs.report_tables(spark, written), result.summary, result.errors)
    tables = {name: pq.read_table(out / name) for name in ("connections", "clients", "topics")}
    tables.update(jobs.report_inputs_arrow(written))
    by_arrow = report.collect_facts_arrow(tables, result.summary, result.errors, pyspark.__version__)
    for facts in (by_spark, by_arrow):
        facts.pop("generated_at")
    assert json.loads(json.dumps(by_arrow, default=str)) == json.loads(json.dumps(by_spark, default=str))
    assert by_arrow["latency"] and by_arrow["brokers"] and by_arrow["undecodable_frames"]
    # Each client's brokers (the report's Next steps names them) come from both engines alike.
    # A client read from a frame file (no addresses) says so rather than naming none.
    for c in by_arrow["clients"]:
        assert (
            c["brokers"] == ["(address unknown)"]
            if c["client_ip"] is None
            else c["brokers"] and all(b.count(":") == 1 for b in c["brokers"])
        ), c


# ---------------------------------------------------------------- topic IDs (KIP-516)
@pytest.fixture(scope="module")
def topic_id_runs(spark, tmp_path_factory):
    """sc.topic_id_captures as one run, combined and reported in the driver, then by Spark."""
    data = tmp_path_factory.mktemp("topic-ids")
    paths = []
    for name, capture in zip(("a.pcap", "b.pcap"), sc.topic_id_captures()):
        (data / name).write_bytes(capture)
        paths.append(str(data / name))
    out, by_spark = tmp_path_factory.mktemp("ids-driver"), tmp_path_factory.mktemp("ids-spark")
    analyze(paths, str(out), spark=spark, progress=False)
    analyze(paths, str(by_spark), spark=spark, options=Options(driver_rows=0, driver_report_frames=0), progress=False)
    return out, by_spark


def test_topic_ids_named_in_another_file_by_both_engines(topic_id_runs):
    for out in topic_id_runs:
        rows = [
            (r["topic"], r["topic_id"], r["partition"], r["produce_records"], r["fetch_records"])
            for r in _table(out, "topics").to_pylist()
        ]
        assert rows == [
            (None, sc.GHOST_ID, 2, 0, 1),
            ("orders", sc.ORDERS_ID, 0, 3, 4),
            ("payments", sc.PAYMENTS_ID, 1, 0, 2),
        ], out
        # The exchanges too: ORDERS_ID is named by b.pcap's response, at the end of the run.
        fetches = {(r["topic"], r["topic_id"]) for r in _table(out, "exchanges").to_pylist() if r["api_key"] == 1}
        assert fetches == {("orders", sc.ORDERS_ID), ("payments", sc.PAYMENTS_ID), (None, sc.GHOST_ID)}, out


def test_an_id_never_named_stays_an_id_and_the_report_says_why(topic_id_runs):
    facts = []
    for out in topic_id_runs:
        report = json.loads((out / "report.json").read_text())
        assert report["unnamed_topic_ids"] == [sc.GHOST_ID]
        markdown = (out / "report.md").read_text()
        assert f"Topic IDs never named in this capture: {sc.GHOST_ID} — no Metadata v10+" in markdown
        assert f"id:{sc.GHOST_ID}" in markdown and "| orders | 0 |" in markdown
        report.pop("generated_at")
        facts.append(report)
    assert facts[0] == facts[1]  # the pyarrow facts and the Spark queries' facts


# ---------------------------------------------------------------- capture sets (kproto/analyze/spark/capture_sets.py)
@pytest.fixture(scope="module")
def rotated(spark, tmp_path_factory):
    """Two brokers' rotated captures in one directory (dumpcap ring names, tcpdump -C names) and two
    files named by hand, analysed with capture sets (the sets larger than the split size: the grouping
    step) and without (the hand-named set alone, read in its task)."""
    from tests import capture_pieces as cp

    sample = (Path(__file__).resolve().parents[2] / "samples" / "sample.pcap").read_bytes()
    spanning = sc.big_capture(connections=3, exchanges=10)
    data = tmp_path_factory.mktemp("rotated")
    unsplit = tmp_path_factory.mktemp("unsplit")
    (unsplit / "sample.pcap").write_bytes(sample)
    (unsplit / "spanning.pcap").write_bytes(spanning)
    cp.write_pieces(data, cp.dumpcap_names("brokerA", 5), cp.cut_pcap(sample, 5))
    cp.write_pieces(data, cp.tcpdump_size_names("brokerB.pcap", 3), cp.cut_pcap(spanning, 3))
    cp.write_pieces(data, ["morning.cap", "evening.cap"], cp.cut_pcap(sample, 2))
    with_sets, without = tmp_path_factory.mktemp("with-sets"), tmp_path_factory.mktemp("without-sets")
    analyze(
        [str(data)],
        str(with_sets),
        spark=spark,
        progress=False,
        options=Options(split_bytes=16_000, named_sets=(("by-hand", "*.cap"),), report=False),
    )
    analyze(
        [str(data)],
        str(without),
        spark=spark,
        progress=False,
        options=Options(capture_sets=False, named_sets=(("by-hand", "*.cap"),), report=False),
    )
    reference = {name: cp.analysed(P.plan_file(str(unsplit / f"{name}.pcap"), 0)) for name in ("sample", "spanning")}
    return data, with_sets, without, reference


def test_rotated_captures_are_one_capture_each_and_give_the_unsplit_tables(rotated):
    from tests import capture_pieces as cp

    data, out, _without, reference = rotated
    summary = {r["capture"]: r for r in _table(out, "summary").to_pylist()}
    sets = {"sample": str(data / "brokerA_*_*.pcap"), "spanning": str(data / "brokerB.pcap*")}
    assert set(summary) == {*sets.values(), "by-hand", "*"}
    assert [summary[c]["files"] for c in (*sets.values(), "by-hand", "*")] == [5, 3, 2, 10]
    assert all(r["accounted"] for r in summary.values())
    for name, capture in sets.items():
        for table in ("frames", "exchanges", "connections", "summary", "errors"):
            written = _table(out, table)
            if "capture" in written.column_names:
                written = written.filter(pa.compute.equal(written["capture"], capture))
            rows = cp.table_rows(written)
            expected = reference[name][table]
            if table == "summary":
                rows = [r for r in rows if '"*"' not in r]
                expected = expected.slice(0, 1)
            assert rows == cp.table_rows(expected), (name, table)
    assert cp.table_rows(
        _table(out, "frames").filter(pa.compute.equal(_table(out, "frames")["capture"], "by-hand"))
    ) == cp.table_rows(reference["sample"]["frames"])


def test_without_capture_sets_every_file_is_read_alone(rotated):
    data, _with_sets, out, reference = rotated
    summary = {r["capture"]: r for r in _table(out, "summary").to_pylist()}
    assert len(summary) == 5 + 3 + 1 + 1 and summary["by-hand"]["files"] == 2
    brokers = [r for c, r in summary.items() if c.startswith(str(data / "broker"))]
    whole = reference["spanning"]["summary"].to_pylist()[0]
    spanning = [r for r in brokers if "brokerB" in r["capture"]]
    assert sum(r["exchanges_paired"] for r in spanning) < whole["exchanges_paired"]
    assert sum(r["connections"] for r in spanning) > whole["connections"]
    assert summary["by-hand"]["exchanges_paired"] == reference["sample"]["summary"].to_pylist()[0]["exchanges_paired"]


def test_file_heads_read_by_the_executors_equal_the_driver_s(spark, rotated, monkeypatch):
    from kproto.analyze.spark import inputs

    data = rotated[0]
    files = sorted((str(p), p.stat().st_size) for p in data.iterdir())
    in_driver = inputs.file_heads(spark, files)
    monkeypatch.setattr(inputs, "_runs_locally", lambda spark, files: False)
    assert sorted(inputs.file_heads(spark, files), key=lambda h: h.path) == sorted(in_driver, key=lambda h: h.path)
    assert len(in_driver) == 10 and all(h.format == "pcap" and h.ends_on_record for h in in_driver)


def test_splits_planned_by_the_executors_equal_the_driver_s(spark, tmp_path, monkeypatch):
    from kproto.analyze.spark import inputs

    (tmp_path / "big.pcap").write_bytes(sc.big_capture(connections=4, exchanges=300))
    (tmp_path / "small.pcap").write_bytes(sc.small_capture())
    files = sorted((str(p), p.stat().st_size) for p in tmp_path.iterdir())
    names = {files[1][0]: "named"}
    in_driver = inputs.plan_files(spark, files, names, split_bytes=1 << 18, overlap_bytes=1 << 16)
    monkeypatch.setattr(inputs, "_runs_locally", lambda spark, files: False)
    on_executors = inputs.plan_files(spark, files, names, split_bytes=1 << 18, overlap_bytes=1 << 16)
    key = lambda s: (s.capture, s.split_index)  # noqa: E731
    assert sorted(on_executors, key=key) == sorted(in_driver, key=key)
    assert len([s for s in in_driver if s.path == files[0][0]]) > 1 and {s.capture for s in in_driver} == {
        files[0][0],
        "named",
    }


def test_the_driver_plans_only_files_it_sees_at_their_listed_length(spark, tmp_path):
    from kproto.analyze.spark import inputs

    capture = tmp_path / "a.pcap"
    capture.write_bytes(sc.small_capture())
    size = capture.stat().st_size
    assert inputs._runs_locally(spark, [(str(capture), size), (capture.as_uri(), size)])
    assert not inputs._runs_locally(spark, [(str(capture), size + 1)])  # not the file the listing saw
    assert not inputs._runs_locally(spark, [(str(tmp_path / "gone.pcap"), size)])
    assert not inputs._runs_locally(spark, [("hdfs://namenode/a.pcap", size)])


def test_inputs_spark_lists_come_back_sorted_with_their_lengths(spark, tmp_path):
    from kproto.analyze.spark import inputs

    for name, frames in (("c.pcap", 3), ("a.pcap", 1), ("b.pcap", 2)):
        (tmp_path / name).write_bytes(b"x" * frames * 100)
    listed = inputs.list_inputs(spark, [tmp_path.as_uri()]).files  # a URI: listed by Spark's binaryFile
    assert [(P.local_path(path), length) for path, length in listed] == [
        (str(tmp_path / n), size) for n, size in (("a.pcap", 100), ("b.pcap", 200), ("c.pcap", 300))
    ]
    assert inputs.list_inputs(spark, [str(tmp_path)]).files == [(P.local_path(p), n) for p, n in listed]


# ---------------------------------------------------------------- other protocols, SASL (issue 35)
@pytest.fixture(scope="module")
def host_runs(spark, tmp_path_factory):
    """A host capture (Kafka, ZooKeeper, HTTP, TLS) and a SASL one, in ranges that cut connections,
    combined and reported in the driver, then by Spark."""
    from tests.protocol_captures import host_capture, sasl_capture

    data = tmp_path_factory.mktemp("host")
    (data / "host.pcap").write_bytes(host_capture()[0])
    sasl, _requests, _responses, secrets = sasl_capture("SCRAM-SHA-256", 1)
    (data / "sasl.pcap").write_bytes(sasl)
    paths = [str(data / "host.pcap"), str(data / "sasl.pcap")]
    out, by_spark = tmp_path_factory.mktemp("host-driver"), tmp_path_factory.mktemp("host-spark")
    options = {"split_bytes": 100_000, "overlap_bytes": 40_000}
    result = analyze(paths, str(out), spark=spark, options=Options(**options), progress=False)
    spark_result = analyze(
        paths,
        str(by_spark),
        spark=spark,
        options=Options(driver_rows=0, driver_report_frames=0, **options),
        progress=False,
    )
    return result, out, spark_result, by_spark, secrets


def test_other_protocols_are_counted_alike_by_both_engines_and_named_in_the_report(host_runs):
    result, out, spark_result, by_spark, secrets = host_runs
    for name in ("connections", "frames", "summary"):
        driver, spark_rows = (
            sorted(json.dumps(r, sort_keys=True, default=str) for r in _table(d, name).to_pylist())
            for d in (out, by_spark)
        )
        assert driver == spark_rows, name
    kinds = sorted((r["capture"].rsplit("/", 1)[-1], r["kind"]) for r in _table(out, "connections").to_pylist())
    assert kinds == [
        ("host.pcap", "http"),
        ("host.pcap", "kafka"),
        ("host.pcap", "tls"),
        ("host.pcap", "tls"),
        ("host.pcap", "zookeeper"),
        ("host.pcap", "zookeeper"),
        ("sasl.pcap", "kafka"),
    ]
    for facts in (result.facts, spark_result.facts):
        assert [(r["kind"], r["server_port"], r["connections"]) for r in facts["other_protocols"]] == [
            ("http", 8080, 1),
            ("tls", 9093, 2),
            ("zookeeper", 2181, 2),
        ]
    report = (out / "report.md").read_text()
    assert "**TLS:** 2 connections on port 9093 are TLS" in report
    bodies = " ".join(b for b in _table(out, "frames")["body"].to_pylist() if b)
    assert "<redacted: " in bodies
    assert not any(base64.b64encode(secret).decode() in bodies or secret.decode() in bodies for secret in secrets)
    assert all(r["accounted"] for r in result.summary)


def test_many_short_connections_across_ranges_are_counted_once(spark, tmp_path):
    """tools/many_connections.py: 1,000 short connections in ranges that cut through them; every count
    of the connections table is the truth, combined in the driver and by Spark (issue 35)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
    import many_connections as MC

    from kproto.analyze.spark.profile import PhaseProfile

    path = tmp_path / "many.pcap"
    size = MC.write(path, 1000)
    truth = MC.truth(1000)
    options = {"split_bytes": size // 8, "overlap_bytes": size // 16}
    # In the driver; by Spark; a large input (its rows of connections after the pass: few, then too many).
    for name, extra in (
        ("driver", {}),
        ("spark", {"driver_rows": 0, "driver_report_frames": 0}),
        ("large", {"driver_input_bytes": 0}),
        ("large-many", {"driver_input_bytes": 0, "driver_rows": 2000}),
    ):
        out = tmp_path / name
        profile = PhaseProfile()
        result = analyze(
            [str(path)], str(out), spark=spark, options=Options(**options, **extra), progress=False, profile=profile
        )
        combined_in_driver = any(p.name.startswith("combining") for p in profile.phases)
        assert combined_in_driver == (name in ("driver", "large")), name
        rows = _table(out, "connections").to_pylist()
        assert len(rows) == 1000, name
        for row in rows:
            expected = truth[(row["client_ip"], row["client_port"])]
            assert {k: row[k] for k in expected} == expected, name
            assert row["closed_by"] == "fin" and row["handshake_seen"], name
        total = result.summary[-1]
        assert (total["connections"], total["frames"], total["accounted"]) == (1000, 6000, True), name


def test_local_workers_get_the_directory_that_holds_this_kproto():
    """A local session puts the kproto package's parent on the workers' PYTHONPATH: a checkout
    run without installing runs its own kproto in the workers too (the move to
    kproto/analyze/spark/ once made this the kproto/ folder itself)."""
    from kproto.analyze.spark import session

    assert (session.PACKAGE_PARENT / "kproto" / "__init__.py").is_file()
    assert Path(sys.modules["kproto"].__file__).resolve().parent.parent == session.PACKAGE_PARENT
