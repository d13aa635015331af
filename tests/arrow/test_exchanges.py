"""kproto.arrow.exchanges: its callers (E.pair, the Spark worker, dump) give the same exchanges."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

import kproto.arrow.frames as kb  # noqa: E402
from kproto.analyze import dump  # noqa: E402
from kproto.analyze.spark import decode as D  # noqa: E402
from kproto.analyze.spark import task as T  # noqa: E402
from kproto.analyze.spark import worker as W  # noqa: E402
from kproto.arrow import exchanges as E  # noqa: E402
from kproto.arrow.capture import read_capture  # noqa: E402
from tests import spark_captures as sc  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[2] / "samples" / "sample.pcap"
SHARED = [name for name in E.pair_schema().names if name in E.exchanges_schema().names]


@pytest.fixture(scope="module", params=["sample", "small"])
def frames(request, tmp_path_factory):
    if request.param == "sample":
        return read_capture(str(SAMPLE)).frames
    path = tmp_path_factory.mktemp("exchanges") / "small.pcap"
    path.write_bytes(sc.small_capture())
    return read_capture(str(path)).frames


def test_batch_api_and_spark_worker_give_the_same_exchanges(frames):
    pairs = E.pair(frames)
    exchanges = D.decode_frames_table(frames).exchanges
    assert pairs.num_rows == exchanges.num_rows > 0
    assert pairs.select(SHARED).equals(exchanges.select(SHARED))
    # Every status has its name, from the one set of codes.
    assert exchanges["pair_status_name"].to_pylist() == [E.PairStatus(s).name for s in pairs["pair_status"].to_pylist()]


def test_small_capture_has_every_pair_status(tmp_path):
    path = tmp_path / "small.pcap"
    path.write_bytes(sc.small_capture())
    assert set(E.pair(read_capture(str(path)).frames)["pair_status"].to_pylist()) == set(E.PairStatus)


@pytest.mark.parametrize("batch_rows", [1, 3, 50])
def test_open_requests_across_batches_match_the_pairing_of_the_whole(frames, batch_rows):
    """dump reads a batch at a time; each response still gets its request's API, version and client id."""
    pairs = E.pair(frames).to_pylist()
    expected = {
        r["response_row"]: (r["api_key"], r["api_version"], r["client_id"])
        for r in pairs
        if r["response_row"] is not None and r["request_row"] is not None
    }
    open_requests = E.OpenRequests()
    got = {}
    for start, batch in zip(range(0, len(frames), batch_rows), frames.to_batches(max_chunksize=batch_rows)):
        headers = kb.decode_frames(batch["payload"], directions=batch["direction"].to_numpy(), client_ids="string")
        keys, versions, client_ids = open_requests.match(batch, headers)
        for i, direction in enumerate(batch["direction"].to_pylist()):
            if direction == kb.RESPONSE and keys[i] >= 0:
                got[start + i] = (int(keys[i]), int(versions[i]), client_ids[i])
    assert got == expected
    # Nothing answered stays open; a request never answered does, unless it expects no response.
    waiting = sum(
        1 for r in pairs if r["pair_status"] == E.PairStatus.UNPAIRED_REQUEST and r["correlation_id"] is not None
    )
    assert len(open_requests) == waiting
    assert dump.OpenRequests is E.OpenRequests


def test_pair_status_rule():
    req = np.array([0, 1, 2, -1])
    resp = np.array([5, -1, -1, 6])
    no_response = np.array([False, True, False, True])
    assert E.pair_status(req, resp, no_response).tolist() == [
        E.PairStatus.PAIRED,
        E.PairStatus.NO_RESPONSE_EXPECTED,
        E.PairStatus.UNPAIRED_REQUEST,
        E.PairStatus.UNPAIRED_RESPONSE,
    ]
    assert E.pair_status(req, resp, no_response).dtype == np.int16
    assert E.status_names(pa.array([0, 3, None, 9], pa.int16()), E.PairStatus).to_pylist() == [
        "PAIRED",
        "UNPAIRED_RESPONSE",
        None,
        None,
    ]


def _fetch_by_id(topic_id: str, names: pa.Table | None) -> dict:
    """The one exchange of a Fetch request and its response addressing ``topic_id``, named by ``names``."""
    heads = E.Heads(
        capture=pa.array(["c", "c"]),
        capture_codes=np.zeros(2, np.int64),
        connection=np.zeros(2, np.int64),
        directions=np.array([0, 1], np.int8),
        sequence=np.zeros(2, np.int64),
        corr=np.array([7, 7]),
        corr_valid=np.ones(2, bool),
        keys=np.array([1, -1], np.int16),
        versions=np.array([16, -1], np.int16),
        ts_first=pa.array([1, 2]),
        ts_last=pa.array([1, 5]),
        sizes=np.array([30, 40], np.int32),
    )
    pairing = E.pair_heads(heads)
    facts = pa.table(
        {
            "status": pa.array([0, 0], pa.int16()),
            "client_id": ["app", None],
            "deprecated": [False, False],
            "removed_in_4x": [False, False],
            "error_code": pa.array([None, 0], pa.int16()),
            "client_software_name": pa.nulls(2, pa.string()),
            "client_software_version": pa.nulls(2, pa.string()),
            "software_problems": pa.nulls(2, pa.string()),
            "acks_zero": [False, False],
        }
    )
    parts = pa.table({"topic": pa.nulls(2, pa.string()), "topic_id": [topic_id, topic_id]})
    (row,) = E.exchanges_table(heads, pairing, facts, parts, np.array([0, 1]), names).to_pylist()
    return row


def test_a_topic_fetched_by_id_carries_the_name_responses_give_it():
    names = pa.table({"topic_id": ["x", "x", "y"], "topic": ["orders-b", "orders-a", "other"]})
    row = _fetch_by_id("x", names)
    # An ID named twice takes the least name, as the topics table does (resolve_topic_ids).
    assert (row["topic"], row["topic_id"], row["pair_status_name"], row["latency_ns"]) == ("orders-a", "x", "PAIRED", 4)
    assert _fetch_by_id("z", names)["topic"] is None  # named by no response: no guess
    assert _fetch_by_id("x", None)["topic"] is None


def test_the_end_of_a_run_names_the_ids_other_tasks_named(tmp_path):
    """a.pcap fetches ORDERS_ID, which only b.pcap's Metadata response names: its task cannot name
    it, the end of the run does, as the topics table does; an ID nobody names stays an ID."""
    import pyarrow.parquet as pq

    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark.exchange_topics import name_written_topics

    out = tmp_path / "out"
    for name in ("frames", "exchanges"):
        (out / name).mkdir(parents=True)
    rows = []
    for index, data in enumerate(sc.topic_id_captures()):
        path = tmp_path / f"{'ab'[index]}.pcap"
        path.write_bytes(data)
        sink = W.ParquetSink(str(out), f"p{index}")
        rows += list(T.process_split(P.plan_file(str(path), len(data))[0], sink=sink))
        sink.close()
    compact = pa.Table.from_batches(rows, schema=W.PARTS_SCHEMA)

    def fetch_topics() -> list[tuple]:
        table = pq.read_table(out / "exchanges" / "part-p0.parquet")
        return [(r["topic"], r["topic_id"]) for r in table.to_pylist() if r["api_key"] == 1]

    assert fetch_topics() == [(None, sc.ORDERS_ID), ("payments", sc.PAYMENTS_ID), (None, sc.GHOST_ID)]
    before = pq.read_table(out / "exchanges" / "part-p0.parquet")
    assert name_written_topics(str(out), compact) == 1  # b.pcap's part holds no ID: left as it was
    assert fetch_topics() == [("orders", sc.ORDERS_ID), ("payments", sc.PAYMENTS_ID), (None, sc.GHOST_ID)]
    after = pq.read_table(out / "exchanges" / "part-p0.parquet")
    assert after.schema.equals(before.schema) and after.drop_columns(["topic"]).equals(before.drop_columns(["topic"]))
    assert name_written_topics(str(out), compact) == 0  # nothing left to name
    assert sorted(p.name for p in (out / "exchanges").iterdir()) == ["part-p0.parquet", "part-p1.parquet"]


def test_a_follow_reads_again_only_the_parts_a_new_name_concerns(tmp_path, monkeypatch):
    """``--follow`` ends a run after each batch: a part already named is read again only when it
    changed or the run's name for one of its topic IDs did (kproto/analyze/spark/exchange_topics.py)."""
    import pyarrow.parquet as pq

    from kproto.analyze.spark import exchange_topics as ET

    out = tmp_path / "out"
    (out / "exchanges").mkdir(parents=True)
    parts = {
        "part-a.parquet": [(None, "id-1"), ("t2", "id-2")],
        "part-b.parquet": [(None, "id-3")],
        "part-c.parquet": [("plain", None)],
    }
    for name, rows in parts.items():
        pq.write_table(
            pa.table(
                {
                    "topic": pa.array([r[0] for r in rows], pa.string()),
                    "topic_id": pa.array([r[1] for r in rows], pa.string()),
                }
            ),
            out / "exchanges" / name,
        )
    reads = []
    real_read = ET.pq.read_table
    monkeypatch.setattr(ET.pq, "read_table", lambda path, **kw: reads.append(Path(path).name) or real_read(path, **kw))

    def names(*pairs) -> pa.Table:
        return pa.table(
            {"kind": ["topic_name"] * len(pairs), "topic_id": [p[0] for p in pairs], "topic": [p[1] for p in pairs]}
        )

    def topics(name: str) -> list:
        return real_read(out / "exchanges" / name)["topic"].to_pylist()

    assert ET.name_written_topics(str(out), names(("id-1", "orders"))) == 1
    assert topics("part-a.parquet") == ["orders", "t2"] and topics("part-b.parquet") == [None]
    assert sorted(set(reads)) == ["part-a.parquet", "part-b.parquet", "part-c.parquet"]  # the first end reads all
    reads.clear()
    assert ET.name_written_topics(str(out), names(("id-1", "orders"))) == 0
    assert reads == []  # the next batch, no new name: nothing read
    assert ET.name_written_topics(str(out), names(("id-1", "orders"), ("id-3", "payments"))) == 1
    assert set(reads) == {"part-b.parquet"} and topics("part-b.parquet") == ["payments"]  # only id-3's part
    reads.clear()
    pq.write_table(
        pa.table({"topic": pa.array([None], pa.string()), "topic_id": ["id-3"]}), out / "exchanges" / "part-c.parquet"
    )  # a part written again is read again
    assert ET.name_written_topics(str(out), names(("id-1", "orders"), ("id-3", "payments"))) == 1
    assert set(reads) == {"part-c.parquet"} and topics("part-c.parquet") == ["payments"]
