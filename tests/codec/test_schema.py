"""The generated schema tables: fresh, complete, and consistent with the definitions."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import kproto
from kproto import ApiKey, schema
from kproto.errors import ErrorCode, error_name, is_retriable
from tests.conftest import ROOT


@pytest.fixture(scope="module")
def gen_schema():
    if not (ROOT / "tools" / "gen_schema.py").is_file():
        pytest.skip("needs the source tree's tools/ (the tests run beside an installed wheel)")
    sys.path.insert(0, str(ROOT / "tools"))
    import gen_schema  # tools/ is no package

    return gen_schema


@pytest.fixture(scope="module")
def generator(gen_schema, shared_protocol_dir):
    """The generator over its real sources; without the release jars it stops with a
    message naming scripts/install-kafka.sh --clients-only (the test fails, never skips)."""
    return gen_schema.Generator(shared_protocol_dir)


def test_committed_tables_are_not_stale(shared_protocol_dir):
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_schema.py"), "--check", "--source", str(shared_protocol_dir)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_generator_is_deterministic(shared_protocol_dir, tmp_path):
    outputs = []
    for i in range(2):
        package = tmp_path / f"run{i}"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "tools" / "gen_schema.py"),
                "--source",
                str(shared_protocol_dir),
                "--package",
                str(package),
            ],
            check=True,
            capture_output=True,
        )
        outputs.append(
            {str(path.relative_to(package)): path.read_bytes() for path in package.rglob("*") if path.is_file()}
        )
    assert sorted(outputs[0]) == [
        "_c/_api_keys.pxd",
        "_common/api_keys.py",
        "_common/error_codes.py",
        "schema/_messages.py",
    ]
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


def test_every_definition_file_is_covered(generator, gen_schema):
    """Every definition of every source (each release jar, ../shared) has its message,
    with every version it defines; old names resolve through aliases."""
    for source in generator.sources():
        for name, definition in source.specs.items():
            valid = gen_schema.parse_versions(definition["validVersions"])
            if valid is None:  # "none": an API this release removed (LeaderAndIsr in 4.x)
                continue
            lo, hi = schema.spec(name)["valid_versions"]
            assert lo <= valid[0] and valid[1] <= hi, (source.label, name)
    assert "DefaultPrincipalData" in schema.MESSAGES and "KRaftVersionRecord" in schema.MESSAGES
    assert "AbortedTxn" in schema.MESSAGES  # a data type new in 4.4


def test_missing_release_jar_fails_naming_the_install_script(tmp_path, shared_protocol_dir):
    result = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "gen_schema.py"),
            "--check",
            "--source",
            str(shared_protocol_dir),
            "--kafka-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode != 0
    assert "scripts/install-kafka.sh --clients-only" in result.stderr and "4.4.0" in result.stderr


def test_stable_layouts_never_differ_between_releases(generator):
    """The newest definition stands for every release only because a stable version's
    wire layout never changes: every difference must involve a version the older
    source marked unstable (ReadShareGroupStateSummary v0 gained LeaderEpoch in 4.1,
    after it was early access in 3.9-4.0)."""
    differences = generator.layout_differences()
    stable = [d for d in differences if not d[3]]
    assert stable == []
    assert {(name, version) for name, version, *_ in differences} == {("ReadShareGroupStateSummaryResponse", 0)}


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
    assert produce["min_version_4x"] == 3  # 4.x removed Produce 0-2
    assert [layer[:2] for layer in produce["layers"]] == [((0, 2), "3.9.2"), ((3, 13), "4.4.0")]
    assert schema.definition_origin("ProduceRequest", 2) == "3.9.2"
    assert schema.definition_origin("ProduceRequest", 13) == "4.4.0"
    assert schema.spec("FetchRequest")["min_version_4x"] == 4
    assert schema.spec("RequestHeader")["min_version_4x"] == 1
    assert schema.spec("ProduceRequest")["deprecated_versions"] == (0, 2)  # 3.9.2's KIP-896 marker
    assert schema.spec("LeaderAndIsrRequest")["min_version_4x"] is None  # 4.x releases define none
    assert schema.definition_origin("LeaderAndIsrRequest", 7) == "3.9.2"
    assert schema.spec("AlterPartitionRequest")["min_version_4x"] == 2  # an inter-broker API: the 4.0 jar


def test_keys_88_to_94_and_newer_versions_come_from_the_4x_releases():
    assert schema.api_keys() == list(range(95))
    assert schema.request_name(88) == "StreamsGroupHeartbeatRequest"
    assert schema.spec("StreamsGroupHeartbeatResponse")["valid_versions"] == (0, 1)
    assert schema.request_name(94) == "UnregisterControllerRequest"
    assert schema.spec("ApiVersionsRequest")["valid_versions"] == (0, 5)
    for name in ("StreamsGroupHeartbeatRequest", "DescribeShareGroupOffsetsResponse", "ApiVersionsResponse"):
        lo, hi = schema.spec(name)["valid_versions"]
        assert all(schema.definition_origin(name, v) == "4.4.0" for v in range(lo, hi + 1)), name
    with pytest.raises(KeyError):
        schema.definition_origin("ProduceRequest", 14)


def test_unstable_versions_are_kept_and_marked():
    # InitProducerId v6 (KIP-939) is still unstable in 4.4: kept, marked, both directions
    for name in ("InitProducerIdRequest", "InitProducerIdResponse"):
        info = schema.spec(name)
        assert info["valid_versions"] == (0, 6) and info["latest_version_unstable"]
        assert schema.is_unstable(name, 6) and not schema.is_unstable(name, 5)
    # Share groups' early-access v0 (3.9-4.0) is in no later release: taken from 4.0.2, marked
    assert schema.definition_origin("ShareGroupHeartbeatRequest", 0) == "4.0.2"
    assert schema.is_unstable("ShareGroupHeartbeatResponse", 0)
    assert not schema.is_unstable("ShareGroupHeartbeatRequest", 1)
    assert not schema.spec("ShareGroupHeartbeatRequest")["latest_version_unstable"]
    # unstable in 4.1, stable since 4.2: the newest definition decides
    assert not schema.is_unstable("OffsetCommitRequest", 10)
    assert not schema.spec("ConsumerGroupHeartbeatRequest")["latest_version_unstable"]


def test_api_key_enum_names_every_request():
    assert [int(k) for k in ApiKey] == schema.api_keys()  # aliases are not listed twice
    for key in schema.api_keys():
        name = schema.request_name(key).removesuffix("Request")
        assert ApiKey[re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()] == key
    assert ApiKey.PRODUCE == 0 and ApiKey.LIST_OFFSETS == 2 and ApiKey(90).name == "DESCRIBE_SHARE_GROUP_OFFSETS"
    assert ApiKey.LIST_CLIENT_METRICS_RESOURCES is ApiKey.LIST_CONFIG_RESOURCES  # the old name of 74
    assert kproto.ApiKey is ApiKey


def test_field_facts():
    fields = {f[0]: f for f in schema.spec("ApiVersionsRequest")["layers"][-1][2]}
    name = fields["client_software_name"]
    assert name[schema.F_VERSIONS] == (3, schema.OPEN) and name[schema.F_IGNORABLE] is True
    header = {f[0]: f for f in schema.spec("RequestHeader")["layers"][-1][2]}
    assert header["client_id"][schema.F_FLEXIBLE] is None  # "flexibleVersions": "none"
    # Defaults: hex, negative, and null are parsed.
    fetch = {f[0]: f for f in schema.spec("FetchRequest")["layers"][-1][2]}
    assert fetch["max_bytes"][schema.F_DEFAULT] == 0x7FFFFFFF
    assert fetch["replica_id"][schema.F_DEFAULT] == -1
    topics = {f[0]: f for f in schema.spec("MetadataRequest")["layers"][-1][2]}
    assert topics["topics"][schema.F_NULLABLE] == (1, schema.OPEN)


def test_tagged_fields_and_tags():
    plan = schema.plan("FetchResponse", 16)
    partition = plan.fields[-1].child.fields[-1].child  # responses[].partitions[]
    assert {op.name: op.tag for op in partition.tagged} == {"diverging_epoch": 0, "current_leader": 1, "snapshot_id": 2}
    assert schema.plan("BrokerHeartbeatRequest", 1).tagged[0].tag == 0


def test_error_codes():
    assert error_name(0) == "NONE" and error_name(35) == "UNSUPPORTED_VERSION"
    assert ErrorCode.by_name("NOT_LEADER_OR_FOLLOWER").code == 6
    assert is_retriable(6) and not is_retriable(35) and not is_retriable(0)
    assert error_name(12345) == "UNKNOWN_CODE_12345"
    assert len(ErrorCode.all()) >= 138


def test_error_codes_of_kafka_4_4_are_named():
    """The codes only the 4.4.0 Errors table has (the reference TSV stops at 128; a 4.4.0
    broker answers UnregisterController with 136), with Java's retriable flag."""
    assert error_name(99) == "POSITION_OUT_OF_RANGE"
    assert error_name(129) == "REBOOTSTRAP_REQUIRED"
    assert error_name(136) == "CONTROLLER_ID_NOT_REGISTERED"
    assert is_retriable(133) and not is_retriable(136)  # SHARE_SESSION_LIMIT_REACHED is retriable


def test_retriable_flags_agree_with_kafka_python():
    errors = pytest.importorskip("kafka.errors")
    import inspect

    theirs = {
        c.errno: c.retriable
        for _n, c in inspect.getmembers(errors, inspect.isclass)
        if issubclass(c, errors.BrokerResponseError) and getattr(c, "errno", None) is not None
    }
    # kafka-python marks CORRUPT_MESSAGE non-retriable; the Java client (CorruptRecordException
    # extends RetriableException) retries it, and so do we.
    differences = {
        code for code, flag in theirs.items() if code in ErrorCode._by_code and is_retriable(code) != flag
    } - {2}
    assert not differences


@pytest.mark.skipif(
    not (ROOT / "tools" / "gen_stubs.py").is_file(),
    reason="needs the source tree's tools/ (the tests run beside an installed wheel)",
)
def test_message_stubs_are_not_stale():
    result = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_stubs.py"), "--check"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_install_script_fetches_every_release_the_generator_reads(gen_schema):
    """`scripts/install-kafka.sh --clients-only` (what `make test` runs) must fetch every
    jar gen_schema reads, or the check fails on a clean machine."""
    script = (ROOT / "scripts" / "install-kafka.sh").read_text(encoding="utf-8")
    fetched = re.search(r"^KAFKA_RELEASES=\(([^)]*)\)", script, flags=re.MULTILINE).group(1).split()
    assert set(gen_schema.KAFKA_RELEASES) <= set(fetched)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test:\n\tscripts/setup\.sh [^\n]*--kafka-clients", makefile, flags=re.MULTILINE)
