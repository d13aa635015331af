"""kproto.arrow.frames: header columns, statuses, JSON bodies, pairing, typed and per-partition views.

Every test runs on both implementations (the ``impl`` fixture swaps the loops
module under kproto.arrow.frames), and the two are compared on random and broken input.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto
import kproto.arrow.frames as kb
from kproto import api, schema
from kproto import messages as m
from kproto.arrow import exchanges
from kproto.arrow.frames import Status
from kproto.errors import DecodeError
from kproto.records import Record, RecordBatch
from tests.strategies import struct_strategy

P = m.ProduceRequest


@pytest.fixture
def loops(impl, monkeypatch):
    """kproto.arrow.frames running on one implementation's loops."""
    monkeypatch.setattr(kb, "_batch", impl.load("batch"))
    return impl


def prefixed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def metadata_request(version: int, correlation_id: int, client_id: str | None = "app") -> bytes:
    return api.encode_request(
        m.MetadataRequest(topics=None), version=version, correlation_id=correlation_id, client_id=client_id
    )


def produce_request(acks: int = 1, correlation_id: int = 7, version: int = 9) -> bytes:
    records = RecordBatch.encode([Record(key=b"k", value=b"v")] * 3, base_offset=0, compression="gzip")
    body = P(
        acks=acks,
        timeout_ms=100,
        topic_data=[
            P.TopicProduceData(
                name="orders",
                partition_data=[
                    P.PartitionProduceData(index=2, records=records),
                    P.PartitionProduceData(index=5, records=None),
                ],
            )
        ],
    )
    return api.encode_request(body, version=version, correlation_id=correlation_id, client_id="prod")


def on_each_implementation(names, run):
    """``run()`` once with kproto.arrow.frames on each named implementation's loops ("c", "py"):
    the results, in order. (Hypothesis tests cannot take the ``loops`` fixture per example.)"""
    from kproto import _impl

    results = []
    for name in names:
        saved, kb._batch = kb._batch, _impl.load("batch", name)
        try:
            results.append(run())
        finally:
            kb._batch = saved
    return results


def test_header_columns_from_a_prefixed_buffer(loops):
    frames = [metadata_request(1, 10), metadata_request(12, 11, "other"), metadata_request(4, 12, None)]
    batch = kb.decode_frames(prefixed(*frames))
    assert batch.schema.equals(kb.frame_schema())
    rows = batch.to_pylist()
    assert [r["offset"] for r in rows] == [0, 4 + len(frames[0]), 8 + len(frames[0]) + len(frames[1])]
    assert [r["size"] for r in rows] == [len(f) for f in frames]
    assert [r["header_version"] for r in rows] == [1, 2, 1]
    assert [r["api_key"] for r in rows] == [3, 3, 3]
    assert [r["api_version"] for r in rows] == [1, 12, 4]
    assert [r["correlation_id"] for r in rows] == [10, 11, 12]
    assert [r["client_id"] for r in rows] == ["app", "other", None]
    assert [r["header_tag_count"] for r in rows] == [None, 0, None]
    assert [r["status"] for r in rows] == [Status.OK] * 3
    assert [r["error_offset"] for r in rows] == [None] * 3
    # MetadataRequest v0-v3 are deprecated by KIP-896; none is below Kafka 4.x's minimum (0).
    assert [r["deprecated"] for r in rows] == [True, False, False]
    assert [r["removed_in_4x"] for r in rows] == [False, False, False]
    assert batch.schema.field("client_id").type == pa.string()
    assert kb.trailing_bytes(batch) == 0


def test_removed_in_4x_flag(loops):
    info = schema.spec("ProduceRequest")
    old = info["min_version_4x"] - 1
    frame = api.encode_request(P(acks=1), version=old, correlation_id=1, client_id="x")
    row = kb.decode_frames(prefixed(frame)).to_pylist()[0]
    assert row["removed_in_4x"] and row["deprecated"] and row["status"] == Status.OK


def test_arrow_input_is_read_in_place_and_nulls_are_rows(loops):
    frames = [metadata_request(9, 1), None, metadata_request(1, 2)]
    for arrow_type in (pa.binary(), pa.large_binary()):
        array = pa.array(frames, arrow_type).slice(0)
        rows = kb.decode_frames(array).to_pylist()
        assert [r["status"] for r in rows] == [Status.OK, Status.NULL_FRAME, Status.OK]
        assert [r["correlation_id"] for r in rows] == [1, None, 2]
    sliced = pa.array(frames, pa.binary()).slice(2)
    assert kb.decode_frames(sliced).to_pylist()[0]["correlation_id"] == 2


def test_bad_frames_get_statuses_and_never_raise(loops):
    good = metadata_request(12, 5)
    response_only_id = struct.pack(">i", 9)
    cases = [
        (b"\x00", Status.TRUNCATED, 0),  # not even an api_key
        (good[:6], Status.TRUNCATED, 4),  # correlation id cut
        (struct.pack(">hhi", 3, 1, 1) + b"\xff\xf0", Status.BAD_LENGTH, 10),  # client id length -16
        (struct.pack(">hhi", 3, 1, 1) + b"\x00\x09ab", Status.TRUNCATED, 10),
        (struct.pack(">hhi", 3, 1, 1) + b"\x00\x02\xff\xfe", Status.MALFORMED, 10),  # not UTF-8
        (struct.pack(">hhi", 3, 12, 1) + b"\xff\xff" + b"\x80\x80\x80\x80\x80", Status.MALFORMED, 14),
        (struct.pack(">hhi", 3, 12, 1) + b"\xff\xff" + b"\x02\x05\x00\x01\x00", Status.MALFORMED, 14),
        (struct.pack(">hhi", 999, 0, 1) + b"\xff\xff", Status.UNKNOWN_API, 10),
        (struct.pack(">hhi", 3, 99, 1) + b"\xff\xff\x00", Status.UNSUPPORTED_VERSION, 11),
    ]
    rows = kb.decode_frames(prefixed(*(c[0] for c in cases))).to_pylist()
    assert [(r["status"], r["error_offset"]) for r in rows] == [(c[1], c[2]) for c in cases]
    assert rows[-2]["api_key"] == 999 and rows[-2]["correlation_id"] == 1
    # Responses: without request info only the correlation id; a bare id is "not supported".
    resp = kb.decode_frames(
        prefixed(response_only_id, response_only_id + b"\x00\x00"),
        directions=1,
        request_api_keys=np.array([3, -1]),
        request_api_versions=np.array([12, -1]),
    ).to_pylist()
    assert [r["status"] for r in resp] == [Status.EMPTY_RESPONSE, Status.NO_REQUEST_INFO]
    assert [r["correlation_id"] for r in resp] == [9, 9]
    assert resp[1]["api_key"] is None


def test_framing_errors_and_trailing_bytes(loops):
    good = metadata_request(12, 5)
    # A last frame cut short is a TRUNCATED row; its bytes are also trailing.
    data = prefixed(good) + prefixed(good)[:-3]
    batch = kb.decode_frames(data)
    assert batch.num_rows == 2
    assert batch["status"].to_pylist() == [Status.OK, Status.TRUNCATED]
    assert batch["correlation_id"].to_pylist() == [5, 5]
    assert kb.trailing_bytes(batch) == len(prefixed(good)) - 3
    # Fewer than 4 bytes form no row at all.
    batch = kb.decode_frames(prefixed(good) + b"\x00\x01")
    assert batch.num_rows == 1 and kb.trailing_bytes(batch) == 2
    # A negative size stops framing: one BAD_LENGTH row, the rest is trailing.
    batch = kb.decode_frames(prefixed(good) + b"\xff\xff\xff\xfe" + good)
    assert batch["status"].to_pylist() == [Status.OK, Status.BAD_LENGTH]
    assert batch["error_offset"].to_pylist() == [None, -4]
    assert kb.trailing_bytes(batch) == 4 + len(good)
    # Above max_frame_size likewise.
    batch = kb.decode_frames(prefixed(good, good), max_frame_size=len(good) - 1)
    assert batch["status"].to_pylist() == [Status.BAD_LENGTH]
    assert kb.decode_frames(b"").num_rows == 0


def test_json_body_matches_to_dict(loops):
    request = produce_request()
    response = api.encode_response(
        m.MetadataResponse(
            brokers=[m.MetadataResponse.MetadataResponseBroker(node_id=1, host='h\u00e9"\n', port=9092)],
            cluster_id="c",
            topics=[m.MetadataResponse.MetadataResponseTopic(name="t", is_internal=False)],
        ),
        version=12,
        correlation_id=3,
    )
    batch = kb.decode_frames(
        prefixed(request, response),
        directions=np.array([0, 1]),
        request_api_keys=np.array([-1, 3]),
        request_api_versions=np.array([-1, 12]),
        body="json",
    )
    bodies = [json.loads(b) for b in batch["body"].to_pylist()]
    assert bodies[0] == api.decode_request(request).body.to_dict()
    assert bodies[1] == api.decode_response(response, 3, 12).body.to_dict()


@pytest.mark.parametrize(
    "name",
    [
        "MetadataResponse",
        "FetchResponse",
        "ProduceRequest",
        "ApiVersionsResponse",
        "DescribeClusterResponse",
        "AlterClientQuotasRequest",
        "CreateTopicsResponse",
    ],
)
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_json_body_property_every_version(loops, name, data):
    info = schema.spec(name)
    lo, hi = info["valid_versions"]
    version = data.draw(st.integers(lo, hi))
    plan = schema.plan(name, version)
    body = data.draw(struct_strategy(plan, unknown_tags=True))
    direction = 1 if info["type"] == "response" else 0
    try:
        if direction:
            frame = api.encode_response(body, version=version, correlation_id=1)
        else:
            frame = api.encode_request(body, version=version, correlation_id=1, client_id="c")
    except Exception:
        return  # a drawn value the encoder refuses (e.g. a null where the version forbids it)
    batch = kb.decode_frames(
        prefixed(frame),
        directions=direction,
        request_api_keys=info["api_key"],
        request_api_versions=version,
        body="json",
    )
    if direction:
        expected = api.decode_response(frame, info["api_key"], version).body.to_dict()
    else:
        expected = api.decode_request(frame).body.to_dict()
    assert batch["status"].to_pylist() == [Status.OK]
    assert json.loads(batch["body"][0].as_py()) == expected


@given(frame=st.binary(max_size=60), cut=st.integers(0, 60), flip=st.integers(0, 255))
def test_c_and_python_agree_on_broken_frames(frame, cut, flip):
    pytest.importorskip("kproto._c._batch")
    base = produce_request()
    mutated = bytearray(base)
    mutated[cut % len(mutated)] ^= flip
    data = prefixed(bytes(mutated), frame, base[:cut], base)
    results = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, body="json"))
    as_dictionary = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids="dictionary"))
    assert as_dictionary[0].equals(as_dictionary[1])
    assert as_dictionary[0].to_pylist() == kb.decode_frames(data).to_pylist()
    c_rows, py_rows = (r.to_pylist() for r in results)
    for c_row, py_row in zip(c_rows, py_rows):
        c_body, py_body = c_row.pop("body"), py_row.pop("body")
        assert c_row == py_row
        assert (c_body is None) == (py_body is None)
        if c_body is not None:
            assert json.loads(c_body) == json.loads(py_body)
    assert len(c_rows) == len(py_rows)
    assert kb.trailing_bytes(results[0]) == kb.trailing_bytes(results[1])


@pytest.mark.parametrize("client_ids", ["dictionary", "string"])
def test_empty_frame_whose_next_bytes_look_like_a_null_id_header(client_ids):
    """An empty frame, then one of 7 bytes: read from the empty frame's payload on, the
    bytes are a Produce v7 header (api key and version: the next size prefix, 00 00 00
    07; correlation id 0x00030004; a null client id). The empty frame is TRUNCATED in
    both loops. (The fast loop once took it: its null-id path did not check that the
    header fits the frame.)"""
    pytest.importorskip("kproto._c._batch")
    after = [metadata_request(4, k, None) for k in range(8)]  # the fast loop leaves the last bytes alone
    data = prefixed(b"", b"\x00\x03\x00\x04\xff\xff\x00", *after)
    c, py = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids=client_ids))
    assert c.to_pylist() == py.to_pylist()
    assert c["status"].to_pylist() == [Status.TRUNCATED, Status.TRUNCATED] + [Status.OK] * 8
    assert c["correlation_id"].to_pylist() == [None, None] + list(range(8))


def _request_kinds() -> list[bytes]:
    """Requests the compiled header loop takes on different paths: its plain-request loop (recent
    client id, no tags), new client ids, null ids, header v0, tagged fields, unknown APIs, versions."""
    kinds = [
        metadata_request(12, 1),
        metadata_request(4, 2),
        metadata_request(12, 3, "x" * 40),
        metadata_request(1, 4, None),
        metadata_request(12, 5, "\u00e9t\u00e9"),
        api.encode_request(m.ControlledShutdownRequest(broker_id=1), version=0, correlation_id=6, client_id=None),
        struct.pack(">hhih", 3, 99, 7, 1) + b"a",
        struct.pack(">hhih", 999, 0, 8, 1) + b"b",
        struct.pack(">hhih", 3, 12, 9, 2) + b"ab" + b"\x01\x05\x01z",  # v2 header, one tag
        struct.pack(">hhih", 3, 12, 10, 5) + b"ab",
        struct.pack(">hhi", 3, 12, 11),
        produce_request(),
    ]
    assert len(kinds) == 12
    return kinds


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(order=st.lists(st.integers(0, 11), max_size=60), cut=st.integers(0, 30))
def test_c_and_python_agree_on_mixed_request_streams(order, cut):
    pytest.importorskip("kproto._c._batch")
    kinds = _request_kinds()
    data = prefixed(*(kinds[k] for k in order))
    data = data[: len(data) - cut] if cut < len(data) else data
    out = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data))
    assert out[0].equals(out[1]) and out[0].schema.equals(out[1].schema)  # the same buffers in both loops
    assert kb.trailing_bytes(out[0]) == kb.trailing_bytes(out[1])
    # ids as a dictionary: the same rows (a dictionary's to_pylist gives its values)
    as_dictionary = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids="dictionary"))
    assert as_dictionary[0].equals(as_dictionary[1])
    assert as_dictionary[0].to_pylist() == out[0].to_pylist()


# Client ids of lengths on both sides of the fast loop's 22 bytes of text, long ids that
# share their first bytes (Java's "consumer-<group>-<n>"), ids that differ in one byte,
# the empty id, non-ASCII.
_ID_STEMS = [
    "",
    "a",
    "producer-7",
    "consumer-1",
    "rdkafka-12345",
    "rdkafka-123456",
    "rdkafka-1234567",
    "consumer-orders-app-1",
    "consumer-orders-app-2",
    "consumer-orders-app-10",
    "x" * 40,
    "x" * 39 + "y",
    "\u00e9t\u00e9-client",
]


def _tagged_request(correlation_id: int, client_id: str) -> bytes:
    """A Metadata v12 request (header v2) whose tag section holds one field."""
    raw = client_id.encode()
    return (
        struct.pack(">hhih", 3, 12, correlation_id, len(raw))
        + raw
        + b"\x01\x05\x01z"
        + m.MetadataRequest(topics=None).encode(12)
    )


def _header_frames(frames) -> bytes:
    """Size-prefixed requests from (client id, "v1" | "v2" | "tagged") pairs."""
    payloads = []
    for k, (client_id, kind) in enumerate(frames):
        if kind == "tagged" and client_id is not None:
            payloads.append(_tagged_request(k, client_id))
        else:
            payloads.append(metadata_request(12 if kind != "v1" else 4, k, client_id))
    return prefixed(*payloads)


@settings(max_examples=120, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(
        st.tuples(
            st.one_of(st.sampled_from(_ID_STEMS), st.none(), st.integers(0, 600).map(lambda k: f"client-{k}")),
            st.sampled_from(["v1", "v2", "tagged"]),
        ),
        max_size=80,
    )
)
def test_header_loop_client_ids_are_exact(frames):
    """Every frame's client id, header version and tag count come out as sent, on both loops."""
    data = _header_frames(frames)
    names = ["py"] + (["c"] if kproto.extension_loaded() else [])
    results = on_each_implementation(names, lambda: kb.decode_frames(data).to_pylist())
    results += on_each_implementation(names, lambda: kb.decode_frames(data, client_ids="dictionary").to_pylist())
    expected = [
        {
            "client_id": client_id,
            "correlation_id": k,
            "header_version": 1 if kind == "v1" else 2,
            "header_tag_count": None if kind == "v1" else (1 if kind == "tagged" and client_id is not None else 0),
            "status": Status.OK,
        }
        for k, (client_id, kind) in enumerate(frames)
    ]
    for rows in results:
        got = [{key: row[key] for key in expected[0]} for row in rows] if expected else rows
        assert got == expected
    assert all(rows == results[0] for rows in results)


def test_header_loop_many_client_ids(loops):
    """Many distinct ids, repeated, some sharing long prefixes: every row keeps its own id,
    and the dictionary, asked for, holds each once."""
    ids = (
        [f"consumer-orders-app-{k}" for k in range(600)]
        + [f"client-{k:05d}" for k in range(600)]
        + [f"c{k}" for k in range(300)]
        + [f"app-{k:010d}" for k in range(100)]
    )
    order = ids * 3
    data = prefixed(*(metadata_request(12 if k % 2 else 4, k, client_id) for k, client_id in enumerate(order)))
    assert kb.decode_frames(data)["client_id"].to_pylist() == order
    batch = kb.decode_frames(data, client_ids="dictionary")
    assert batch["client_id"].to_pylist() == order
    assert batch["client_id"].dictionary.to_pylist() == ids  # in order of first appearance
    assert set(batch["status"].to_pylist()) == {Status.OK}


def test_api_versions_unsupported_version_body_reads_as_v0(loops):
    response = api.encode_response(m.ApiVersionsResponse(error_code=35, api_keys=[]), version=0, correlation_id=4)
    batch = kb.decode_frames(prefixed(response), directions=1, request_api_keys=18, request_api_versions=3, body="json")
    assert batch["status"].to_pylist() == [Status.OK]
    assert json.loads(batch["body"][0].as_py())["error_code"] == 35


def test_api_versions_error_35_at_the_asked_version_keeps_its_fields(loops):
    body = m.ApiVersionsResponse(
        error_code=35,
        throttle_time_ms=7,
        api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=3)],
        supported_features=[m.ApiVersionsResponse.SupportedFeatureKey(name="f", min_version=1, max_version=2)],
    )
    v0 = api.encode_response(
        m.ApiVersionsResponse(
            error_code=35, api_keys=[m.ApiVersionsResponse.ApiVersion(api_key=3, min_version=0, max_version=9)]
        ),
        version=0,
        correlation_id=5,
    )
    v3 = api.encode_response(body, version=3, correlation_id=4)
    broken = v3[:-3]
    batch = kb.decode_frames(
        prefixed(v3, v0, broken), directions=1, request_api_keys=18, request_api_versions=3, body="json"
    )
    assert json.loads(batch["body"][0].as_py()) == body.to_dict()
    assert json.loads(batch["body"][1].as_py())["api_keys"] == [{"api_key": 3, "min_version": 0, "max_version": 9}]
    # Neither v3 nor v0 reads the cut body: the error is the one of v3, as kproto.api gives it.
    with pytest.raises(DecodeError) as info:
        api.decode_response(broken, 18, 3)
    assert batch["status"].to_pylist()[2] == Status.TRUNCATED and batch["body"][2].as_py() is None
    assert batch["error_offset"][2].as_py() == info.value.offset


def capture_table(requests: list[bytes], responses: list[bytes], connection: int = 1) -> pa.Table:
    payload = requests + responses
    n = len(payload)
    return pa.table(
        {
            "capture": ["cap"] * n,
            "connection_id": pa.array([connection] * n, pa.int64()),
            "direction": pa.array([0] * len(requests) + [1] * len(responses), pa.int8()),
            "sequence": pa.array(list(range(len(requests))) + list(range(len(responses))), pa.int64()),
            "ts_first_ns": pa.array([1000 * i for i in range(n)], pa.int64()),
            "ts_last_ns": pa.array([1000 * i + 10 for i in range(n)], pa.int64()),
            "size": pa.array([len(p) for p in payload], pa.int32()),
            "payload": pa.array(payload, pa.binary()),
        }
    )


def test_pair_requests_and_responses(loops):
    requests = [
        metadata_request(12, 1),
        metadata_request(12, 2),
        produce_request(acks=0, correlation_id=3),
        metadata_request(12, 4),
    ]
    responses = [
        api.encode_response(m.MetadataResponse(cluster_id="a"), version=12, correlation_id=2),
        api.encode_response(m.MetadataResponse(cluster_id="b"), version=12, correlation_id=1),
        api.encode_response(m.MetadataResponse(), version=12, correlation_id=77),
    ]
    table = capture_table(requests, responses)
    pairs = exchanges.pair(table, body="json")
    assert pairs.schema.equals(exchanges.pair_schema("json"))
    rows = {(r["correlation_id"], r["pair_status"]): r for r in pairs.to_pylist()}
    assert set(rows) == {
        (1, 0),
        (2, 0),
        (3, kb.PairStatus.NO_RESPONSE_EXPECTED),
        (4, kb.PairStatus.UNPAIRED_REQUEST),
        (77, kb.PairStatus.UNPAIRED_RESPONSE),
    }
    one = rows[(1, 0)]
    assert one["request_row"] == 0 and one["response_row"] == 5
    assert one["latency_ns"] == table["ts_last_ns"][5].as_py() - table["ts_first_ns"][0].as_py()
    assert json.loads(one["response_body"])["cluster_id"] == "b"
    assert one["api_key"] == 3 and one["client_id"] == "app"
    orphan = rows[(77, kb.PairStatus.UNPAIRED_RESPONSE)]
    assert orphan["response_status"] == Status.NO_REQUEST_INFO and orphan["api_key"] is None


def test_pair_reused_correlation_ids_pair_in_order(loops):
    requests = [metadata_request(12, 5), metadata_request(12, 5)]
    responses = [
        api.encode_response(m.MetadataResponse(cluster_id=c), version=12, correlation_id=5) for c in ("first", "second")
    ]
    pairs = exchanges.pair(capture_table(requests, responses), body="json").to_pylist()
    assert [(p["request_row"], p["response_row"]) for p in pairs] == [(0, 2), (1, 3)]
    assert [json.loads(p["response_body"])["cluster_id"] for p in pairs] == ["first", "second"]


def test_typed_struct_column(loops):
    request = produce_request()
    frames = prefixed(metadata_request(12, 1), request)
    column = kb.decode_struct_column(frames, "ProduceRequest")
    assert column.type == kb.body_type("ProduceRequest")
    values = column.to_pylist()
    assert values[0] is None
    part = values[1]["topic_data"][0]["partition_data"][0]
    assert part["index"] == 2 and part["records_batch_count"] == 1 and part["records_record_count"] == 3
    assert values[1]["acks"] == 1 and values[1]["transactional_id"] is None
    # The union type holds fields of every version; a field this version lacks is null.
    assert "topic_id" in [f.name for f in kb.body_type("ProduceRequest")["topic_data"].type.value_type]
    assert values[1]["topic_data"][0]["topic_id"] is None and values[1]["topic_data"][0]["name"] == "orders"
    old = kb.decode_struct_column(
        prefixed(api.encode_request(P(acks=1), version=2, correlation_id=1, client_id="x")), "ProduceRequest"
    )
    assert old.to_pylist()[0]["transactional_id"] is None and old.to_pylist()[0]["acks"] == 1


def test_produce_partitions(loops):
    table = kb.partitions(prefixed(metadata_request(12, 1), produce_request()))
    assert table.schema.equals(kb.partition_schema())
    rows = table.to_pylist()
    assert [(r["frame"], r["topic"], r["partition"]) for r in rows] == [(1, "orders", 2), (1, "orders", 5)]
    assert rows[0]["batch_count"] == 1 and rows[0]["record_count"] == 3
    assert rows[0]["compression"] == "gzip" and rows[0]["bytes"] > 0
    assert rows[1]["batch_count"] == 0 and rows[1]["bytes"] == 0


def test_fetch_partitions(loops):
    F = m.FetchResponse
    records = RecordBatch.encode([Record(value=b"x")] * 2, base_offset=10)
    body = F(
        responses=[
            F.FetchableTopicResponse(topic="t", partitions=[F.PartitionData(partition_index=0, records=records)])
        ]
    )
    frame = api.encode_response(body, version=12, correlation_id=1)
    rows = kb.partitions(prefixed(frame), directions=1, request_api_keys=1, request_api_versions=12).to_pylist()
    assert rows == [
        {
            "frame": 0,
            "api_key": 1,
            "direction": 1,
            "topic": "t",
            "topic_id": None,
            "partition": 0,
            "error_code": 0,
            "batch_count": 1,
            "record_count": 2,
            "bytes": len(records),
            "compression": "none",
            "producer_id": -1,
            "records_error": None,
        }
    ]


def _record_sets() -> list[bytes | None]:
    """Record sets of every kind partitions reads: the compiled pass summarizes magic 2 itself
    and hands the rest (legacy, unknown codecs, corruption) to the records module."""
    from kproto.records import LegacyBatch

    v2 = RecordBatch.encode([Record(key=b"k", value=b"v")] * 3, base_offset=5, producer_id=42)
    zstd = RecordBatch.encode([Record(value=b"z" * 40)] * 2, base_offset=8, compression="zstd")
    legacy = LegacyBatch.encode([Record(value=b"old")] * 2, magic=1)
    wrapped = LegacyBatch.encode([Record(value=b"old")] * 2, magic=1, compression="gzip")
    bad_magic = bytearray(v2)
    bad_magic[16] = 7
    negative = bytearray(v2)
    negative[8:12] = struct.pack(">i", -3)
    unknown_codec = bytearray(v2)
    unknown_codec[22] |= 6  # codec 6: not one Kafka defines (the CRC is not read here)
    return [
        None,
        b"",
        v2,
        v2 + zstd,
        v2 + v2[:30],
        v2 + legacy,
        legacy,
        wrapped,
        bytes(bad_magic),
        v2 + bytes(negative),
        bytes(unknown_codec),
        v2[:11],
    ]


def _both_partitions(data: bytes, **options) -> tuple[pa.Table, pa.Table]:
    pytest.importorskip("kproto._c._batch")
    c_table, py_table = on_each_implementation(("c", "py"), lambda: kb.partitions(data, **options))
    return c_table, py_table


@pytest.mark.parametrize("version", [3, 9, 11, 13])
def test_partitions_c_and_python_agree_on_every_kind_of_record_set(version):
    import uuid

    parts = [P.PartitionProduceData(index=i, records=r) for i, r in enumerate(_record_sets())]
    topics = [
        P.TopicProduceData(name="orders", topic_id=uuid.UUID(int=7), partition_data=parts),
        P.TopicProduceData(name="", topic_id=uuid.UUID(int=0), partition_data=parts[:2]),
    ]
    frame = api.encode_request(
        P(acks=1, timeout_ms=5, topic_data=topics), version=version, correlation_id=1, client_id="c"
    )
    c, py = _both_partitions(prefixed(metadata_request(12, 2), frame))
    assert c.num_rows == len(parts) + 2
    assert c.to_pylist() == py.to_pylist()
    rows = c.to_pylist()
    assert rows[5]["records_error"] is None and rows[5]["batch_count"] == 3  # v2 then a legacy set
    assert rows[7]["record_count"] is None and rows[7]["compression"] == "gzip"  # a compressed wrapper
    assert "magic 7" in rows[8]["records_error"] and "negative" in rows[9]["records_error"]
    assert rows[9]["batch_count"] == 1  # counts so far are kept
    assert rows[10]["compression"] == "unknown(6)"
    assert rows[2]["producer_id"] == 42 and rows[4]["batch_count"] == 1  # the cut tail: not an error
    if version >= 13:
        assert rows[0]["topic"] is None and rows[0]["topic_id"] == str(uuid.UUID(int=7))
        assert rows[-1]["topic_id"] is None
    else:
        assert rows[0]["topic"] == "orders" and rows[-1]["topic"] is None and rows[0]["topic_id"] is None


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_fetch_partitions_c_and_python_agree(version):
    import uuid

    F = m.FetchResponse
    parts = [
        F.PartitionData(partition_index=i, error_code=(0, -1, 6)[i % 3], records=r)
        for i, r in enumerate(_record_sets())
    ]
    body = F(responses=[F.FetchableTopicResponse(topic="t", topic_id=uuid.UUID(int=9), partitions=parts)])
    frame = api.encode_response(body, version=version, correlation_id=1)
    c, py = _both_partitions(prefixed(frame), directions=1, request_api_keys=1, request_api_versions=version)
    assert c.num_rows == len(parts)
    assert c.to_pylist() == py.to_pylist()
    assert c["error_code"].to_pylist()[:3] == [0, -1, 6]


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(cut=st.integers(0, 400), flip=st.integers(1, 255), where=st.integers(0, 10_000))
def test_partitions_c_and_python_agree_on_broken_frames(cut, flip, where):
    parts = [P.PartitionProduceData(index=i, records=r) for i, r in enumerate(_record_sets())]
    frame = bytearray(
        api.encode_request(
            P(acks=1, timeout_ms=5, topic_data=[P.TopicProduceData(name="orders", partition_data=parts)]),
            version=9,
            correlation_id=1,
            client_id="c",
        )
    )
    frame[where % len(frame)] ^= flip
    good = produce_request()
    c, py = _both_partitions(prefixed(bytes(frame), good[:cut], good))
    assert c.to_pylist() == py.to_pylist()


def test_bad_arguments_raise(loops):
    with pytest.raises(ValueError):
        kb.decode_frames(prefixed(metadata_request(12, 1)), directions=np.array([0, 1]))
    with pytest.raises(TypeError):
        kb.decode_frames(pa.array([1, 2]))
    with pytest.raises(ValueError):
        kb.decode_frames(b"", body="xml")


@pytest.mark.parametrize("direction", [0, 1])
def test_pair_with_one_side_only(direction):
    """Captures holding only requests (or only responses) pair into unpaired rows, no error."""
    import pyarrow as pa

    import kproto
    from kproto.messages import MetadataRequest, MetadataResponse

    if direction == 0:
        payload = kproto.encode_request(MetadataRequest(), version=12, correlation_id=1, client_id="x")
    else:
        payload = kproto.encode_response(MetadataResponse(), version=12, correlation_id=1)
    table = pa.table(
        {
            "capture": pa.array(["a", "a"]),
            "connection_id": pa.array([1, 1], pa.int64()),
            "direction": pa.array([direction] * 2, pa.int8()),
            "sequence": pa.array([0, 1], pa.int64()),
            "ts_first_ns": pa.array([1, 2], pa.int64()),
            "ts_last_ns": pa.array([1, 2], pa.int64()),
            "size": pa.array([len(payload)] * 2, pa.int32()),
            "payload": pa.array([payload] * 2, pa.binary()),
        }
    )
    pairs = exchanges.pair(table)
    assert pairs.num_rows == 2
    expected = kb.PairStatus.UNPAIRED_REQUEST if direction == 0 else kb.PairStatus.UNPAIRED_RESPONSE
    assert set(pairs.column("pair_status").to_pylist()) == {expected}


def _first_appearance(ids: list[str | None]) -> list[str]:
    return list(dict.fromkeys(i for i in ids if i is not None))


def test_header_loop_thousands_of_client_ids_zipf(loops):
    """Thousands of ids, Zipf-drawn in random order, of lengths around the fast loop's
    22 bytes of text and sharing long prefixes: every row keeps its id, the dictionary
    (asked for) is in order of first appearance (header v1 and v2 frames interleaved)."""
    rng = np.random.default_rng(18)
    stems = ["c", "producer-", "consumer-orders-app-", "x" * 21, "x" * 22, "x" * 30, "\u00e9t\u00e9-"]
    ids = [f"{stems[k % len(stems)]}{k}" for k in range(5000)]
    weights = 1.0 / np.arange(1, len(ids) + 1)
    order = [ids[k] for k in rng.choice(len(ids), size=20_000, p=weights / weights.sum())]
    order += ids  # and every id at least once, the last ones new near the end
    data = prefixed(*(metadata_request(12 if k % 2 else 4, k, client_id) for k, client_id in enumerate(order)))
    assert kb.decode_frames(data)["client_id"].to_pylist() == order
    batch = kb.decode_frames(data, client_ids="dictionary")
    assert batch["client_id"].to_pylist() == order
    assert batch["client_id"].dictionary.to_pylist() == _first_appearance(order)
    assert set(batch["status"].to_pylist()) == {Status.OK}


# Ids that differ only at the fast loop's word ends or past them: in byte 14, 22 (the
# last the fast loop copies in one go), past it, in length alone, or only by the byte
# after them.
_EDGE_IDS = [
    "a" * 14,
    "a" * 13 + "b",
    "a" * 15,
    "a" * 22,
    "a" * 21 + "b",
    "a" * 23,
    "a" * 24,
    "a" * 23 + "b",
    "a" * 40,
    "a" * 39 + "b",
    "b" + "a" * 39,
    "a" * 13,
    "",
    "a",
]


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=st.lists(
        st.tuples(
            st.one_of(
                st.sampled_from(_EDGE_IDS),
                st.none(),
                st.text(max_size=30),
                st.integers(0, 3000).map(lambda k: f"consumer-orders-{k}"),
            ),
            st.sampled_from(["v1", "v2", "tagged"]),
        ),
        max_size=300,
    )
)
def test_c_and_python_agree_on_many_client_ids(frames):
    """Many ids at once, any text, both loops: same buffers; same dictionary when asked for one."""
    pytest.importorskip("kproto._c._batch")
    data = _header_frames(frames)
    as_text = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data))
    assert as_text[0].equals(as_text[1])
    c, py = on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids="dictionary"))
    assert c.to_pylist() == py.to_pylist() == as_text[0].to_pylist()
    assert c["client_id"].dictionary.to_pylist() == py["client_id"].dictionary.to_pylist()
    assert c["client_id"].to_pylist() == [client_id for client_id, _ in frames]
    assert c["client_id"].dictionary.to_pylist() == _first_appearance([client_id for client_id, _ in frames])
