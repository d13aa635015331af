"""A range of a pcap decoded in bounded chunks (kproto/analyze/spark/range_pipeline.py): the same tables as at once."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from kproto.analyze.spark import decode as D
from kproto.analyze.spark import planning as P
from kproto.analyze.spark import range_pipeline as R
from kproto.analyze.spark import task as T
from kproto.analyze.spark import worker as W
from kproto.messages import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from tests import spark_captures as sc
from tests.capture_pieces import analysed
from tests.pcapwriter import Conversation


def mixed_capture(rounds: int = 16) -> bytes:
    """Three interleaved connections with what pairing and the exchanges' columns depend on: responses
    whose requests came before the capture, a client reusing one correlation id, acks=0 Produce
    requests, ApiVersions with client software, an API without a schema, Fetch and Metadata by topic ID."""
    reuse = Conversation(client=("10.2.0.1", 42000), server=("10.2.0.200", 9092), client_isn=100, server_isn=9000)
    fire = Conversation(client=("10.2.0.2", 42001), server=("10.2.0.200", 9092), client_isn=200, server_isn=19000)
    named = Conversation(client=("10.2.0.3", 42002), server=("10.2.0.200", 9092), client_isn=300, server_isn=29000)
    t = sc.Timeline()
    for c in (reuse, fire, named):
        t.add(c.handshake())
    # Answers to requests the capture missed: they pair with the first requests reusing the id.
    t.add(reuse.data("server", sc.response(sc.produce_ok("early", 0), 9, 0), [1000]))
    t.add(reuse.data("server", sc.response(sc.produce_ok("early", 1), 9, 0), [1000]))
    data = sc.records(4)
    for n in range(rounds):
        t.add(reuse.data("client", sc.request(sc.produce("reused", n % 2, data), 9, 0, "reuse"), [300]))
        t.add(fire.data("client", sc.request(sc.produce("fire", n % 3, data, acks=0), 9, n, "fire"), [500]))
        t.add(
            named.data(
                "client",
                sc.request(
                    ApiVersionsRequest(client_software_name="app", client_software_version=f"1.{n}"), 3, 2 * n, "named"
                ),
                [1000],
            )
        )
        t.add(reuse.data("server", sc.response(sc.produce_ok("reused", n % 2), 9, 0), [700]))
        t.add(
            named.data("server", sc.response(ApiVersionsResponse(error_code=35 if n % 4 == 3 else 0), 3, 2 * n), [1000])
        )
        t.add(named.data("client", sc.request(sc.fetch_by_id(sc.ORDERS_ID, n % 2), 16, 2 * n + 1, "named"), [1000]))
        t.add(named.data("server", sc.response(sc.fetched_by_id(sc.ORDERS_ID, n % 2, data), 16, 2 * n + 1), [400]))
        if n % 3 == 0:
            t.add(fire.data("client", sc.request(MetadataRequest(topics=None), 12, 1000 + n, "fire"), [1000]))
            t.add(fire.data("server", sc.response(sc.metadata_naming(("orders", sc.ORDERS_ID)), 12, 1000 + n), [1000]))
        if n % 5 == 0:
            t.add(fire.data("client", sc._prefixed(bytes.fromhex("03e7000000000007") + b"\x00\x04fire"), [1000]))
    for c in (reuse, fire, named):
        t.add(c.close())
    return t.getvalue()


def analysed_ranges(splits, chunk_bytes: int, monkeypatch) -> tuple[dict[str, pa.Table], list[tuple[int, int]]]:
    """Every table of the splits, decoded with chunks of ``chunk_bytes``; and each chunk decoded (frames, payload bytes)."""
    monkeypatch.setattr(R, "CHUNK_BYTES", chunk_bytes)
    chunks = []
    decode_chunk = D.decode_chunk
    monkeypatch.setattr(
        D,
        "decode_chunk",
        lambda frames, *args, **kwargs: (
            chunks.append((frames.num_rows, pc.sum(pc.binary_length(frames["payload"])).as_py() or 0))
            or decode_chunk(frames, *args, **kwargs)
        ),
    )
    return analysed(splits), list(chunks)  # a copy: a later call wraps this wrapper again


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    path = tmp_path_factory.mktemp("chunks") / "mixed.pcap"
    path.write_bytes(mixed_capture())
    return str(path)


@pytest.mark.parametrize("chunk_bytes", [600, 1500])
def test_chunked_ranges_give_the_same_tables_in_the_same_order(mixed, chunk_bytes, monkeypatch):
    splits = P.plan_file(mixed, 0, split_bytes=5_000, overlap=3_000)
    assert len(splits) > 3
    at_once, chunks_at_once = analysed_ranges(splits, 1 << 30, monkeypatch)
    chunked, chunks = analysed_ranges(splits, chunk_bytes, monkeypatch)
    # Chunking happened: the same frames in more batches. How many more depends on when the capture
    # engine releases the frames it holds until a connection's kind is proved (a burst of them goes
    # to one batch), not on the chunking: no count of extra batches per range is promised.
    assert sum(frames for frames, _ in chunks) == sum(frames for frames, _ in chunks_at_once)
    assert len(chunks) > len(chunks_at_once)
    assert max(size for _, size in chunks) < max(size for _, size in chunks_at_once)
    for name, table in at_once.items():
        assert chunked[name].equals(table), name
    statuses = pc.value_counts(at_once["exchanges"]["pair_status_name"]).to_pylist()
    assert {s["values"] for s in statuses} == {
        "PAIRED",
        "NO_RESPONSE_EXPECTED",
        "UNPAIRED_REQUEST",
        "UNPAIRED_RESPONSE",
    }
    (summary,) = [r for r in at_once["summary"].to_pylist() if r["capture"] == mixed]
    assert summary["frames"] == chunked["frames"].num_rows


def test_ranges_read_as_streams_twice_give_the_same_tables(mixed, monkeypatch):
    # Files behind a URI (hdfs:, s3a:) are not mapped: each pass reads the range as a stream.
    splits = P.plan_file(mixed, 0, split_bytes=5_000, overlap=3_000)
    mapped, _ = analysed_ranges(splits, 1 << 30, monkeypatch)

    class Unmapped(P._Source):
        @property
        def mapped(self) -> bool:
            return False

    monkeypatch.setattr(T, "_Source", Unmapped)
    streamed, chunks = analysed_ranges(splits, 600, monkeypatch)
    assert len(chunks) > 2 * len(splits)
    for name, table in mapped.items():
        assert streamed[name].equals(table), name


@pytest.mark.parametrize("batch_bytes", [100, 600])
def test_a_stream_read_in_small_batches_gives_every_frame(mixed, batch_bytes):
    # The reader stops feeding when a batch is full: the rest of its last read must still come.
    from kproto.arrow.capture import CaptureReader

    with open(mixed, "rb") as handle:
        whole = pa.Table.from_batches(list(CaptureReader(handle)))
    with open(mixed, "rb") as handle:
        data = io.BytesIO(handle.read())  # a file object without a descriptor: read as a stream
    small = pa.Table.from_batches(list(CaptureReader(data, batch_bytes=batch_bytes, batch_frames=10)))
    assert whole.num_rows == 130
    assert small.drop_columns(["capture"]).equals(whole.drop_columns(["capture"]))


def test_chunked_ranges_pair_as_the_whole_file(tmp_path, monkeypatch):
    # Without reused correlation ids, a range pairs as the whole file does (with them, a range
    # that starts among unanswered requests pairs from there: see the mixed capture above).
    path = tmp_path / "big.pcap"
    path.write_bytes(sc.big_capture(connections=4, exchanges=30))
    monkeypatch.setattr(R, "CHUNK_BYTES", 600)
    ranges = W.Sink()
    for split in P.plan_file(str(path), 0, split_bytes=12_000, overlap=8_000):
        list(T.process_split(split, sink=ranges))
    whole = W.Sink()
    list(T.process_split(P.plan_file(str(path), 0)[0], sink=whole))

    def rows(table, columns):
        return sorted(tuple(r.values()) for r in table.select(columns).to_pylist())

    frame_columns = ["direction", "ts_first_ns", "size", "api_key", "correlation_id", "client_id", "status", "body"]
    assert rows(ranges.table("frames"), frame_columns) == rows(whole.table("frames"), frame_columns)
    exchange_columns = [
        "api_key",
        "correlation_id",
        "client_id",
        "pair_status_name",
        "request_ts_ns",
        "response_ts_ns",
        "error_code",
        "topic",
    ]
    assert rows(ranges.table("exchanges"), exchange_columns) == rows(whole.table("exchanges"), exchange_columns)
    assert ranges.table("exchanges").num_rows == 120


def test_parquet_sink_writes_each_add_into_one_hidden_file_until_closed(tmp_path):
    for name in ("frames", "exchanges"):
        (tmp_path / name).mkdir()
    sink = W.ParquetSink(str(tmp_path), "p1")
    frames = W.FRAMES_SCHEMA.empty_table()
    first = pa.table({"capture": ["a", "a"], "sequence": [1, 2]})
    first = pa.Table.from_batches([W.conform(W.FRAMES_SCHEMA, {c: first[c] for c in first.column_names}, 2)])
    second = pa.Table.from_batches(
        [W.conform(W.FRAMES_SCHEMA, {"capture": pa.array(["b"]), "sequence": pa.array([3])}, 1)]
    )
    sink.add("frames", first)
    sink.add("frames", frames)  # nothing to write
    sink.add("frames", second)
    assert [p.name for p in (tmp_path / "frames").iterdir()] == [".part-p1.parquet.tmp"]
    sink.close()
    assert [p.name for p in (tmp_path / "frames").iterdir()] == ["part-p1.parquet"]
    assert not list((tmp_path / "exchanges").iterdir())
    written = pq.ParquetFile(tmp_path / "frames" / "part-p1.parquet")
    assert written.metadata.num_row_groups == 2
    assert written.read().to_pydict()["sequence"] == [1, 2, 3]


def test_a_range_that_sees_only_a_connections_end_says_how_it_ended(tmp_path):
    """A connection talks early and closes late: its FINs fall in a range that never saw it open
    (nothing of it in that range's context). That range's reader opens it from a FIN and says
    how it ended, so its row says "fin" and its last time, as a reader of the whole file does
    (it said "end" and the last time a range saw one of its payloads)."""
    from kproto.arrow.capture import read_capture

    early = Conversation(client=("10.3.0.1", 43000), server=("10.3.0.200", 9092), client_isn=100, server_isn=9000)
    busy = Conversation(client=("10.3.0.2", 43001), server=("10.3.0.200", 9092), client_isn=200, server_isn=19000)
    t = sc.Timeline()
    for c in (early, busy):
        t.add(c.handshake())
    t.add(early.data("client", sc.request(MetadataRequest(topics=None), 12, 1, "early"), [1000]))
    t.add(early.data("server", sc.response(sc.metadata_naming(("orders", sc.ORDERS_ID)), 12, 1), [1000]))
    for n in range(40):
        t.add(busy.data("client", sc.request(ApiVersionsRequest(), 3, n, "busy"), [1000]))
        t.add(busy.data("server", sc.response(ApiVersionsResponse(error_code=0), 3, n), [1000]))
    t.add(early.close())
    t.add(busy.close())
    path = tmp_path / "late-fin.pcap"
    path.write_bytes(t.getvalue())
    splits = P.plan_file(str(path), path.stat().st_size, split_bytes=path.stat().st_size // 4, overlap=300)
    assert len(splits) >= 4
    rows = {r["client_port"]: r for r in analysed(splits)["connections"].to_pylist()}
    _frames, whole, _counters = read_capture(str(path))
    for expected in whole.to_pylist():
        row = rows[expected["client_port"]]
        assert {k: row[k] for k in expected if k not in ("capture", "connection_id")} == {
            k: v for k, v in expected.items() if k not in ("capture", "connection_id")
        }, expected["client_port"]
    assert rows[43000]["closed_by"] == "fin"
