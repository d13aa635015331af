"""``kproto dump``: a body shows the fields of its frame's version only, and ``--error`` keeps the
frames whose body holds a Kafka error code (top level or nested)."""

from __future__ import annotations

import json

import pytest

import kproto
from kproto.analyze.cli import main
from kproto.messages import MetadataRequest, ProduceResponse


def frames_file(tmp_path, payloads):
    path = tmp_path / "frames.bin"
    path.write_bytes(b"".join(len(p).to_bytes(4, "big") + p for p in payloads))
    return path


def dump(capsys, *argv):
    status = main(["dump", *map(str, argv), "--format", "jsonl"])
    out, err = capsys.readouterr()
    return status, [json.loads(line) for line in out.splitlines()], err


def test_a_v8_metadata_request_has_no_topic_id(tmp_path, capsys):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")])
    payloads = [kproto.encode_request(request, version=v, correlation_id=v, client_id="me") for v in (8, 12)]
    status, records, _ = dump(capsys, frames_file(tmp_path, payloads))
    assert status == 0
    v8, v12 = (r["body"] for r in records)
    assert v8["topics"] == [{"name": "orders"}] and "include_cluster_authorized_operations" in v8
    assert set(v12["topics"][0]) == {"topic_id", "name"}
    assert "include_cluster_authorized_operations" not in v12  # v11 removed it
    main(["dump", str(frames_file(tmp_path, payloads[:1])), "--format", "tree"])
    assert "topic_id" not in capsys.readouterr().out


def test_error_filter_by_name_and_number_nested(tmp_path, capsys):
    from kproto.analyze import dump as kdump
    from kproto.errors import ErrorCode

    code = ErrorCode.by_name("NOT_LEADER_OR_FOLLOWER").code
    nested = ProduceResponse(
        responses=[
            ProduceResponse.TopicProduceResponse(
                name="orders", partition_responses=[ProduceResponse.PartitionProduceResponse(index=0, error_code=code)]
            )
        ]
    ).to_dict()
    body = json.dumps(nested, separators=(",", ":"))
    import pyarrow as pa

    filters = kdump.Filters(error_codes={code})
    assert filters.error_mask(pa.array([body, body.replace(f":{code},", ":0,"), None])).tolist() == [True, False, False]
    from kproto.analyze.cli_dump import error_code_of

    assert error_code_of("not_leader_or_follower") == error_code_of(str(code)) == code
    assert main(["dump", str(frames_file(tmp_path, [b"\x00" * 8])), "--error", "NOPE"]) == 2
    assert "not a Kafka error code" in capsys.readouterr().err


def test_body_fields_version_on_both_loops(impl, monkeypatch):
    """decode_frames(body_fields="version"): the twins give the same text, the fields of the version
    only (nested too); "all" keeps to_dict()'s shape."""
    import kproto.arrow.frames as kb
    from kproto.messages import FetchRequest

    monkeypatch.setattr(kb, "_batch", impl.load("batch"))
    fetch = FetchRequest(
        topics=[
            FetchRequest.FetchTopic(
                topic="orders", partitions=[FetchRequest.FetchPartition(partition=0, fetch_offset=5)]
            )
        ]
    )
    bodies = [(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")]), v) for v in (0, 8, 12)]
    bodies += [(fetch, 4), (fetch, 12), (fetch, 13)]
    payloads = [
        kproto.encode_request(body, version=v, correlation_id=i, client_id="me") for i, (body, v) in enumerate(bodies)
    ]
    data = b"".join(len(p).to_bytes(4, "big") + p for p in payloads)
    shown = [json.loads(t) for t in kb.decode_frames(data, body="json", body_fields="version")["body"].to_pylist()]
    full = [json.loads(t) for t in kb.decode_frames(data, body="json")["body"].to_pylist()]
    assert full[1] == MetadataRequest.decode(payloads[1][payloads[1].index(b"me") + 2 :], 8).to_dict()
    assert shown[1] == {
        "topics": [{"name": "orders"}],
        "allow_auto_topic_creation": True,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    assert shown[0] == {"topics": [{"name": "orders"}]}
    assert "topic_id" in full[1]["topics"][0]
    assert "topic_id" not in shown[4]["topics"][0] and shown[5]["topics"][0]["topic_id"]
    assert "topic" not in shown[5]["topics"][0] and "topic" in shown[4]["topics"][0]
    assert "rack_id" not in shown[3] and "rack_id" in shown[4] and "isolation_level" in shown[3]
    for s, f in zip(shown, full):  # dropping fields only: what is shown is as the full body has it
        assert all(f[k] == v for k, v in s.items() if not isinstance(v, list))
    with pytest.raises(ValueError, match="body_fields"):
        kb.decode_frames(data, body="json", body_fields="some")
