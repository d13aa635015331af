"""``kproto dump``: a body shows the fields of its frame's version only, and ``--error`` keeps the
frames whose body holds a Kafka error code (top level or nested)."""

from __future__ import annotations

import json

import kproto
from kproto.cli import main
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
    assert "include_cluster_authorized_operations" not in v12     # v11 removed it
    main(["dump", str(frames_file(tmp_path, payloads[:1])), "--format", "tree"])
    assert "topic_id" not in capsys.readouterr().out


def test_error_filter_by_name_and_number_nested(tmp_path, capsys):
    from kproto import dump as kdump
    from kproto.errors import ErrorCode

    code = ErrorCode.by_name("NOT_LEADER_OR_FOLLOWER").code
    nested = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="orders", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=0, error_code=code)])]).to_dict()
    body = json.dumps(nested, separators=(",", ":"))
    import pyarrow as pa
    filters = kdump.Filters(error_codes={code})
    assert filters.error_mask(pa.array([body, body.replace(f":{code},", ":0,"), None])).tolist() \
        == [True, False, False]
    from kproto.cli_dump import error_code_of
    assert error_code_of("not_leader_or_follower") == error_code_of(str(code)) == code
    assert main(["dump", str(frames_file(tmp_path, [b"\x00" * 8])), "--error", "NOPE"]) == 2
    assert "not a Kafka error code" in capsys.readouterr().err
