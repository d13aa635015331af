"""The generated schema tables: fresh, complete, and consistent with the definitions."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from kproto import schema
from kproto.errors import ErrorCode, error_name, is_retriable

from .conftest import ROOT


def test_committed_tables_are_not_stale(shared_protocol_dir):
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema.py"), "--check",
                             "--source", str(shared_protocol_dir)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_generator_is_deterministic(shared_protocol_dir, tmp_path):
    outputs = []
    for i in range(2):
        package = tmp_path / f"run{i}"
        subprocess.run([sys.executable, str(ROOT / "tools" / "gen_schema.py"), "--source",
                        str(shared_protocol_dir), "--package", str(package)], check=True, capture_output=True)
        outputs.append({str(path.relative_to(package)): path.read_bytes() for path in package.rglob("*.py")})
    assert sorted(outputs[0]) == ["_common/error_codes.py", "schema/_messages.py"]
    assert outputs[0] == outputs[1]


def test_generated_table_reads_as_one_line_per_field():
    """A Kafka upgrade must be a reviewable diff: each field is its own line, and
    no line carries a whole message."""
    text = (ROOT / "kproto" / "schema" / "_messages.py").read_text(encoding="utf-8")
    longest = max(text.splitlines(), key=len)
    assert len(longest) <= 200, longest
    fields = 0

    def count(entries):
        nonlocal fields
        for entry in entries:
            fields += 1
            count(entry[schema.F_CHILDREN])

    for facts in schema.MESSAGES.values():
        for _versions, _origin, entries in facts["layers"]:
            count(entries)
    assert len(re.findall(r"^ +field\(", text, flags=re.MULTILINE)) == fields


def test_every_definition_file_is_covered(shared_protocol_dir):
    import json

    names = set()
    for folder in ("message", "message-4x"):
        for path in (shared_protocol_dir / folder).glob("*.json"):
            text = "\n".join(line for line in path.read_text().splitlines()
                             if not line.lstrip().startswith("//"))
            names.add(json.loads(text)["name"])
    for name in names:
        assert schema.spec(name)   # old names resolve through aliases
    assert "DefaultPrincipalData" in schema.MESSAGES and "KRaftVersionRecord" in schema.MESSAGES


def test_api_key_74_has_both_names():
    old = schema.message_class("ListClientMetricsResourcesRequest")
    new = schema.message_class("ListConfigResourcesRequest")
    assert old is new and schema.request_name(74) == "ListConfigResourcesRequest"
    assert schema.spec("ListClientMetricsResourcesResponse")["api_key"] == 74
    from kproto import messages
    assert messages.ListClientMetricsResourcesRequest is messages.ListConfigResourcesRequest


def test_versions_come_from_the_newest_definition():
    produce = schema.spec("ProduceRequest")
    assert produce["valid_versions"] == (0, 13)
    assert produce["min_version_4x"] == 3                          # 4.x removed Produce 0-2
    assert [layer[0] for layer in produce["layers"]] == [(0, 2), (3, 13)]
    assert schema.spec("FetchRequest")["min_version_4x"] == 4
    assert schema.spec("RequestHeader")["min_version_4x"] == 1
    assert schema.spec("ProduceRequest")["deprecated_versions"] is not None
    assert schema.spec("LeaderAndIsrRequest")["min_version_4x"] is None   # no 4.x client definition


def test_field_facts():
    fields = {f[0]: f for f in schema.spec("ApiVersionsRequest")["layers"][-1][2]}
    name = fields["client_software_name"]
    assert name[schema.F_VERSIONS] == (3, schema.OPEN) and name[schema.F_IGNORABLE] is True
    header = {f[0]: f for f in schema.spec("RequestHeader")["layers"][-1][2]}
    assert header["client_id"][schema.F_FLEXIBLE] is None             # "flexibleVersions": "none"
    # Defaults: hex, negative, and null are parsed.
    fetch = {f[0]: f for f in schema.spec("FetchRequest")["layers"][-1][2]}
    assert fetch["max_bytes"][schema.F_DEFAULT] == 0x7FFFFFFF
    assert fetch["replica_id"][schema.F_DEFAULT] == -1
    topics = {f[0]: f for f in schema.spec("MetadataRequest")["layers"][-1][2]}
    assert topics["topics"][schema.F_NULLABLE] == (1, schema.OPEN)


def test_tagged_fields_and_tags():
    plan = schema.plan("FetchResponse", 16)
    partition = plan.fields[-1].child.fields[-1].child   # responses[].partitions[]
    assert {op.name: op.tag for op in partition.tagged} == {
        "diverging_epoch": 0, "current_leader": 1, "snapshot_id": 2}
    assert schema.plan("BrokerHeartbeatRequest", 1).tagged[0].tag == 0


def test_error_codes():
    assert error_name(0) == "NONE" and error_name(35) == "UNSUPPORTED_VERSION"
    assert ErrorCode.by_name("NOT_LEADER_OR_FOLLOWER").code == 6
    assert is_retriable(6) and not is_retriable(35) and not is_retriable(0)
    assert error_name(12345) == "UNKNOWN_CODE_12345"
    assert len(ErrorCode.all()) >= 129


def test_retriable_flags_agree_with_kafka_python():
    errors = pytest.importorskip("kafka.errors")
    import inspect

    theirs = {c.errno: c.retriable for _n, c in inspect.getmembers(errors, inspect.isclass)
              if issubclass(c, errors.BrokerResponseError) and getattr(c, "errno", None) is not None}
    # kafka-python marks CORRUPT_MESSAGE non-retriable; the Java client (CorruptRecordException
    # extends RetriableException) retries it, and so do we.
    differences = {code for code, flag in theirs.items() if code in ErrorCode._by_code
                   and is_retriable(code) != flag} - {2}
    assert not differences


@pytest.mark.skipif(not (ROOT / "tools" / "gen_stubs.py").is_file(),
                    reason="needs the source tree's tools/ (the tests run beside an installed wheel)")
def test_message_stubs_are_not_stale():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
