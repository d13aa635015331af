"""kproto against Apache Kafka's own Java codec, message by message (issue 36).

For every (API, version, request/response) that both the newest Kafka release's
jar (``ApiMessageType``) and kproto's tables know, 100 seeded messages (more with
KPROTO_ORACLE_MESSAGES; tests/message_samples.py: edge values, nulls, empty and
large arrays, unknown tagged fields) are encoded by kproto and sent to tools/oracle/KafkaCodecOracle.java:

* Kafka's generated class reads kproto's bytes, every one of them, and writes
  back exactly kproto's bytes;
* Kafka's JSON form of what it read equals kproto's ``to_dict()`` of the message,
  field by field, with the representation differences mapped in one place,
  ``java_oracle.kafka_json``; every implementation in this process (the extension
  and the pure-Python twin, or the twin alone under KPROTO_NO_EXTENSIONS=1) writes
  the same bytes and reads them back to the same ``to_dict()``;
* Kafka's encoding of the message it reads from that JSON form equals kproto's
  encoding (without unknown tagged fields, which the JSON form cannot carry).

The same checks run on the headers and data types, by class name; and two more
compare kproto's encoder and decoder with Kafka's on what no valid message holds:
a value in a field the version lacks, and damaged bodies.

The cases the jar has and kproto does not (newer APIs and versions) are counted
and printed, never dropped in silence; those kproto has and the jar does not
(versions Kafka 4 removed) are compared the same way with Kafka 3.9's jar. The
lists come from the jars' ``ApiMessageType`` and kproto's tables, so new tables
are covered without a change here.

Needs Java and the Kafka jars: ``make test-kafka``, or ``scripts/install-kafka.sh
4.4.0 3.9.2`` then ``pytest -m kafka tests/codec/test_java_oracle.py``.
Marked ``slow`` too, so ``make test`` leaves it out.
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import uuid
import zlib
from pathlib import Path

import pytest

from kproto import _impl, schema
from kproto.errors import DecodeError, EncodeError
from kproto.schema import (
    ARRAY,
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    UINT16,
    UINT32,
    UUID,
    Message,
)
from kproto.schema._shapes import F_CHILDREN, F_NAME, F_STRUCT, F_TYPE
from tests.message_samples import samples

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import java_oracle  # noqa: E402  (tools/ is no package)
from java_oracle import JavaOracle, OracleError, OracleUnavailable, kafka_json  # noqa: E402

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

#: Messages per (message, version): ~700 cases, about a minute per implementation on an idle 2-core machine.
MESSAGES_PER_CASE = int(os.environ.get("KPROTO_ORACLE_MESSAGES", "100"))
#: Disagreements shown in a failure, in full; all are counted.
SHOWN = int(os.environ.get("KPROTO_ORACLE_SHOWN", "25"))
DIRECTIONS = ("request", "response")
#: The last 3.x release: the oracle for the versions Kafka 4.0 removed.
OLDER_KAFKA = "3.9.2"


def _start(version: str) -> JavaOracle:
    try:
        return JavaOracle(version)
    except OracleUnavailable as exc:  # a missing tool fails, it never skips
        pytest.fail(f"Kafka {version}'s Java codec is not available: {exc}")


@pytest.fixture(scope="module")
def oracle():
    with _start(java_oracle.NEWEST_KAFKA) as running:
        yield running


@pytest.fixture(scope="module")
def older_oracle():
    with _start(OLDER_KAFKA) as running:
        yield running


def api_case(api_key: int, version: int, direction: str) -> tuple[str, int, str]:
    """(kproto's message name, version, the oracle's name for it) of an API body."""
    name = schema.request_name(api_key) if direction == "request" else schema.response_name(api_key)
    return name, version, f"{api_key}:{direction}"


def matrix(apis: list[dict]) -> tuple[list[tuple], list[tuple], list[tuple]]:
    """(both, jar only, kproto only): (api_key, version, direction) of the jar and of kproto."""
    jar = {
        (api["api_key"], v, d)
        for api in apis
        if "unusable" not in api
        for v in range(api["lowest"], api["highest"] + 1)
        for d in DIRECTIONS
    }
    ours = set()
    for key in schema.api_keys():
        lo, hi = schema.spec(schema.request_name(key))["valid_versions"]
        ours |= {(key, v, d) for v in range(lo, hi + 1) for d in DIRECTIONS}
    return sorted(jar & ours), sorted(jar - ours), sorted(ours - jar)


def first_difference(expected, got, path: str = "") -> str | None:
    """Where two JSON values differ (types strictly: a bool is no int; NaN equals NaN), or None."""
    if isinstance(expected, float) and isinstance(got, float):
        same = (
            math.isnan(expected)
            and math.isnan(got)
            or expected == got
            and math.copysign(1, expected) == math.copysign(1, got)
        )
        return None if same else f"{path}: kproto {expected!r}, Java {got!r}"
    if type(expected) is not type(got):
        return f"{path}: kproto {expected!r}, Java {got!r}"
    if isinstance(expected, dict):
        for key in sorted(set(expected) | set(got)):
            if key not in got or key not in expected:
                return f"{path}.{key}: only in {'kproto' if key in expected else 'Java'}"
            found = first_difference(expected[key], got[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        if len(expected) != len(got):
            return f"{path}: kproto {len(expected)} elements, Java {len(got)}"
        for i, (a, b) in enumerate(zip(expected, got)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if expected == got else f"{path}: kproto {expected!r}, Java {got!r}"


def without_unknown_tags(obj):
    """A copy of a message with every struct's unknown tagged fields removed."""
    copy = type(obj)(**{name: _strip(getattr(obj, name)) for name in obj._field_names})
    return copy


def _strip(value):
    if isinstance(value, Message):
        return without_unknown_tags(value)
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def has_unknown_tags(value) -> bool:
    if isinstance(value, Message):
        return bool(value._unknown_tags) or any(has_unknown_tags(getattr(value, n)) for n in value._field_names)
    if isinstance(value, list):
        return any(has_unknown_tags(v) for v in value)
    return False


def check_case(
    oracle: JavaOracle, codecs: dict, name: str, version: int, target: str, count: int
) -> list[tuple[str, str]]:
    """(kind, text) of the disagreements over ``count`` messages of kproto's ``name`` at
    ``version``, which the oracle knows as ``target``."""
    plan = schema.plan(name, version)
    where = f"{plan.name} v{version}"
    problems: list[tuple[str, str]] = []
    expectations = []
    requests = []
    for i, obj in enumerate(samples(plan, count, seed=zlib.crc32(f"{target} {version}".encode()))):
        encoded = {name: codec.encode_struct(obj, plan) for name, codec in codecs.items()}
        data = next(iter(encoded.values()))
        if len(set(encoded.values())) != 1:
            problems.append((WIRE, f"{where} #{i}: the implementations encode differently"))
            continue
        fields = obj.to_dict()
        for name, codec in codecs.items():
            found = first_difference(fields, codec.decode_struct(data, plan).to_dict(), "")
            if found:
                problems.append((WIRE, f"{where} #{i}: {name} decodes its encoding otherwise: {found}"))
        bare = (
            codecs[next(iter(codecs))].encode_struct(without_unknown_tags(obj), plan) if has_unknown_tags(obj) else data
        )
        expectations.append((i, data, fields, bare))
        requests.append(("parse", target, version, data.hex()))
        as_json = kafka_json(fields, plan, records_as_size=False, omit_default_tags=False)
        requests.append(("encode", target, version, json.dumps(as_json, separators=(",", ":"))))
    answers = oracle.ask(requests)
    for (i, data, fields, bare), parsed, encoded in zip(expectations, answers[::2], answers[1::2]):
        problems += compare(f"{where} #{i}", plan, data, fields, bare, parsed, encoded)
    return problems


#: The kinds of disagreement: Java cannot read kproto's bytes or writes back others; the
#: JSON forms differ; Java's encoding from the JSON form fails or differs.
WIRE, JSON, JSON_ENCODE = "wire", "json", "json-encode"

#: Cases where kproto's message tables and the newest jar's are known to differ, with the
#: kinds of disagreement that follows: none since the tables are made from that jar. An
#: entry that agrees fails the test, so this cannot hold a stale excuse.
TABLE_DIFFERENCES: dict[tuple[str, int], tuple[str, set[str]]] = {}


def compare(
    where: str, plan, data: bytes, fields: dict, bare: bytes, parsed: dict, encoded: dict
) -> list[tuple[str, str]]:
    problems = []
    if not parsed["ok"]:
        problems.append(
            (
                WIRE,
                f"{where}: Java cannot read kproto's bytes ({parsed['stage']}: {parsed['error']}); bytes {data.hex()}",
            )
        )
    else:
        if parsed["hex"] != data.hex():
            problems.append((WIRE, f"{where}: Java writes back other bytes: kproto {data.hex()}, Java {parsed['hex']}"))
        expected = kafka_json(fields, plan, records_as_size=True, omit_default_tags=True)
        found = first_difference(expected, parsed["json"], plan.name)
        if found:
            problems.append((JSON, f"{where}: JSON differs at {found}"))
    if not encoded["ok"]:
        problems.append(
            (JSON_ENCODE, f"{where}: Java cannot encode kproto's JSON ({encoded['stage']}: {encoded['error']})")
        )
    elif encoded["hex"] != bare.hex():
        problems.append((JSON_ENCODE, f"{where}: Java encodes other bytes: kproto {bare.hex()}, Java {encoded['hex']}"))
    return problems


def check_cases(oracle: JavaOracle, cases: list[tuple], differences: dict) -> tuple[set, list[str], dict]:
    """(failing cases, their disagreements, {(message, version): disagreements} of the
    cases that differ as ``differences`` says)."""
    codecs = {name: _impl.load("codec", name) for name in _impl.available()}
    problems: list[str] = []
    failing: set[tuple] = set()
    known: dict[tuple[str, int], int] = {}
    for name, version, target in cases:
        found = check_case(oracle, codecs, name, version, target, MESSAGES_PER_CASE)
        _reason, allowed = differences.get((name, version), ("", set()))
        if found and {kind for kind, _ in found} <= allowed:
            known[name, version] = len(found)
        elif found:
            failing.add((name, version))
            problems += [text for _, text in found]
    print(
        f"\nKafka {oracle.version} Java codec vs kproto ({', '.join(codecs)}), {MESSAGES_PER_CASE} messages "
        f"per case: {len(cases) - len(failing) - len(known)} of {len(cases)} (message, version) "
        f"cases agree both ways; {len(problems)} disagreements in {len(failing)} cases; "
        f"{len(known)} cases differ as TABLE_DIFFERENCES says ({sum(known.values())} disagreements)."
    )
    return failing, problems, known


def test_kproto_agrees_with_kafkas_java_codec(oracle):
    both, jar_only, kproto_only = matrix(oracle.apis())
    failing, problems, known = check_cases(oracle, [api_case(*c) for c in both], TABLE_DIFFERENCES)
    print(
        f"Not compared with Kafka {oracle.version}: {len(jar_only)} cases only its jar knows "
        f"({_summary(jar_only)}); {len(kproto_only)} only kproto knows ({_summary(kproto_only)})."
    )
    assert len(both) > 500, "too few cases in common: is the oracle listing the jar's APIs?"
    assert not problems, f"{len(problems)} disagreements in {len(failing)} cases:\n" + "\n".join(problems[:SHOWN])
    agree_now = sorted(set(TABLE_DIFFERENCES) - set(known))
    assert not agree_now, f"these cases agree with Java now: remove them from TABLE_DIFFERENCES: {agree_now}"


def test_versions_kafka_4_removed_agree_with_kafka_3_9(oracle, older_oracle):
    # kproto still reads what Kafka 4 removed (old clients in old captures): the last
    # 3.x release's codec is the oracle for those cases.
    _both, _jar_only, kproto_only = matrix(oracle.apis())
    older_both, _, _ = matrix(older_oracle.apis())
    cases = sorted(set(kproto_only) & set(older_both))
    failing, problems, _known = check_cases(older_oracle, [api_case(*c) for c in cases], {})
    nowhere = sorted(set(kproto_only) - set(older_both))
    print(
        f"Of the {len(kproto_only)} cases Kafka {oracle.version} lacks, {len(cases)} were compared with "
        f"Kafka {older_oracle.version}; {len(nowhere)} are in neither jar ({_summary(nowhere)})."
    )
    assert len(cases) > 100, "too few cases: is the oracle listing the jar's APIs?"
    assert not problems, f"{len(problems)} disagreements in {len(failing)} cases:\n" + "\n".join(problems[:SHOWN])


#: Damaged bodies per (API, version, direction): cut, one byte changed or one inserted.
DAMAGED_PER_CASE = 45


def _damage(data: bytes, rng: random.Random) -> bytes:
    roll, at = rng.random(), rng.randrange(len(data) + 1)
    if roll < 0.3:
        return data[:at]
    if roll < 0.8 and at < len(data):
        return data[:at] + bytes([rng.randrange(256)]) + data[at + 1 :]
    return data[:at] + bytes([rng.randrange(256)]) + data[at:]


def _kproto_reencodes(codecs: dict, data: bytes, plan) -> set:
    """What each implementation (the C one lazily and eagerly) writes back: hex, or the
    DecodeError's reason."""
    out = set()
    for name, codec in codecs.items():
        for lazy in (True, False) if name == "c" else (True,):
            try:
                decoded = codec.decode_struct(data, plan, lazy=lazy)
            except DecodeError as exc:
                out.add(("refused", exc.reason))
                continue
            out.add(("wrote", codec.encode_struct(decoded, plan).hex()))
    return out


#: Java's refusals of bytes kproto reads and writes back unchanged, on purpose: an unknown
#: tag that another version of the struct defines, and unknown tags out of order or above
#: 2**31 - 1 (Java keeps tags in an int).
JAVA_STRICTER = ("is not valid for version", "Invalid raw tag field list")


def damage_verdict(data: bytes, ours: tuple[str, str], java: dict) -> str:
    """How kproto and Kafka's codec judge a damaged body; a verdict in ``ACCEPTED`` or a problem.

    Where only one codec reads the bytes, the one that writes them back unchanged decides:
    bytes a codec reads and writes back as they were are a message, and the other must read
    them (or be listed in ``JAVA_STRICTER``); bytes it reads but writes back otherwise (Java
    reads any negative length as null, drops varint bits above 32, ignores a known tagged
    field's size, replaces bad UTF-8) it read leniently, and the other may refuse them.
    """
    outcome, detail = ours
    if outcome == "wrote" and java["ok"]:
        return "both read" if detail == java["hex"] else f"both read, write back differently: kproto {detail}"
    if outcome == "refused" and not java["ok"]:
        return "both refuse"
    if outcome == "refused":
        return (
            "Java reads leniently"
            if java["hex"] != data.hex()
            else f"kproto refuses ({detail}) bytes Java reads and writes back unchanged"
        )
    if detail != data.hex():
        return "kproto reads leniently"
    if any(k in java["error"] for k in JAVA_STRICTER):
        return "Java refuses on purpose"
    return f"Java refuses ({java['error']}) bytes kproto reads and writes back unchanged"


ACCEPTED = ("both read", "both refuse", "Java reads leniently", "kproto reads leniently", "Java refuses on purpose")


@pytest.mark.parametrize("release", ["newest", "older"])
def test_damaged_bytes_are_read_or_refused_as_kafka_does(oracle, older_oracle, release):
    # Bytes kproto never wrote (cut, a byte changed or inserted), read by both codecs.
    both, _, kproto_only = matrix(oracle.apis())
    if release == "older":
        oracle, both = older_oracle, sorted(set(kproto_only) & set(matrix(older_oracle.apis())[0]))
    codecs = {name: _impl.load("codec", name) for name in _impl.available()}
    counts: dict[str, int] = {}
    problems = []
    for name, version, target in [api_case(*c) for c in both]:
        if (name, version) in TABLE_DIFFERENCES:
            continue
        plan = schema.plan(name, version)
        rng = random.Random(zlib.crc32(f"damage {target} {version}".encode()))
        bodies = [
            codecs[next(iter(codecs))].encode_struct(obj, plan)
            for obj in samples(plan, DAMAGED_PER_CASE // 3, seed=rng.randrange(2**32))
        ]
        damaged = [_damage(body, rng) for body in bodies for _ in range(3)]
        answers = oracle.ask([("parse", target, version, data.hex()) for data in damaged])
        for data, answer in zip(damaged, answers):
            ours = _kproto_reencodes(codecs, data, plan)
            if len(ours) != 1:
                problems.append(f"{name} v{version} {data.hex()}: the implementations disagree: {ours}")
                continue
            verdict = damage_verdict(data, ours.pop(), answer)
            if verdict in ACCEPTED:
                counts[verdict] = counts.get(verdict, 0) + 1
            else:
                problems.append(f"{name} v{version} {data.hex()}: {verdict}")
    print(f"Kafka {oracle.version}, damaged bodies: {counts}")
    assert counts.get("both read", 0) > 1000 and counts.get("both refuse", 0) > 1000
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:SHOWN])


# A value other than each kind's usual default, for the fields a version lacks.
_OTHER = {
    BOOL: True,
    INT8: 5,
    INT16: 5,
    INT32: 5,
    INT64: 5,
    UINT16: 5,
    UINT32: 5,
    FLOAT64: 1.5,
    UUID: uuid.UUID(int=5),
    STRING: "x",
    BYTES: b"x",
    RECORDS: b"x",
}


def _other_value(op, element_type: str):
    if op.kind == ARRAY:  # an absent field's plan has no element kind: take Kafka's type name
        return [_OTHER[schema.KIND_OF_TYPE[element_type]]]
    value = _OTHER[op.kind]
    if value == op.default:
        value = 6 if isinstance(value, int) and not isinstance(value, bool) else not value
    return value


def _field_types(message: str) -> dict[tuple[str, str], str]:
    """(struct name, field name) -> Kafka's type name ("int32", "[]string"), over every version."""
    types: dict[tuple[str, str], str] = {}

    def walk(struct: str, fields: tuple) -> None:
        for f in fields:
            types[struct, f[F_NAME]] = f[F_TYPE]
            if f[F_STRUCT] is not None:
                walk(f[F_STRUCT], f[F_CHILDREN])

    for _versions, _origin, fields in schema.spec(message)["layers"]:
        walk(message, fields)
    return types


def _in_some_version(name: str, field: str, versions: range) -> bool:
    """Whether a top-level field of message ``name`` exists in any of ``versions``."""
    lo, hi = schema.spec(name)["valid_versions"]
    return any(
        field in {op.name for op in schema.plan(name, v).fields + schema.plan(name, v).tagged}
        for v in versions
        if lo <= v <= hi
    )


@pytest.mark.parametrize("release", ["newest", "older"])
def test_fields_a_version_lacks_are_refused_or_dropped_as_kafka_does(oracle, older_oracle, release):
    # Kafka refuses to write a non-default value in a field the version lacks unless the
    # field is ignorable (then it drops it); kproto's encoder must decide the same way.
    both, _, kproto_only = matrix(oracle.apis())
    known_versions = None
    if release == "older":  # the versions Kafka 4 removed, against Kafka 3.9
        oracle, both = older_oracle, sorted(set(kproto_only) & set(matrix(older_oracle.apis())[0]))
        known_versions = {
            api["api_key"]: range(api["lowest"], api["highest"] + 1)
            for api in older_oracle.apis()
            if "unusable" not in api
        }
    codecs = [_impl.load("codec", name) for name in _impl.available()]
    checks, requests, problems = [], [], []
    for name, version, target in [api_case(*c) for c in both]:
        plan = schema.plan(name, version)
        if release == "newest" and any(name == known for known, _ in TABLE_DIFFERENCES):
            continue  # a renamed field's JSON name is the newest jar's
        names = java_oracle._kafka_names(plan.cls._message_name)
        types = _field_types(plan.cls._message_name)
        base = kafka_json(plan.cls().to_dict(), plan, records_as_size=False, omit_default_tags=False)
        for op in plan.absent:
            if op.struct_cls is not None:
                continue  # a struct of a version that lacks it has no JSON form
            older_versions = known_versions and known_versions[int(target.split(":")[0])]
            if older_versions and not _in_some_version(name, op.name, older_versions):
                continue  # a field newer than the older jar: its class has no such field to judge
            element = types[plan.name, op.name].removeprefix("[]")  # the type, or its elements'
            obj = plan.cls(**{op.name: _other_value(op, element)})
            ours = set()
            for codec in codecs:
                try:
                    ours.add(codec.encode_struct(obj, plan).hex())
                except EncodeError:
                    ours.add(None)
            if len(ours) != 1:
                problems.append(f"{name} v{version} {op.name}: the implementations disagree: {ours}")
                continue
            ours = ours.pop()
            value, kind = obj.to_dict()[op.name], schema.KIND_OF_TYPE[element]
            as_json = dict(base)
            as_json[names[plan.name, op.name]] = (
                [java_oracle._kafka_value(op, kind, v, False, False) for v in value]
                if op.kind == ARRAY
                else java_oracle._kafka_value(op, kind, value, False, False)
            )
            checks.append((f"{name} v{version} {op.name} (ignorable: {op.ignorable})", ours))
            requests.append(("encode", target, version, json.dumps(as_json, separators=(",", ":"))))
    for (where, ours), answer in zip(checks, oracle.ask(requests)):
        theirs = answer["hex"] if answer["ok"] else None
        if not answer["ok"] and answer["stage"] != "write":
            problems.append(f"{where}: Java cannot read the JSON form ({answer['error']})")
        elif ours != theirs:
            problems.append(
                f"{where}: kproto {'refuses' if ours is None else 'writes ' + ours}, "
                f"Java {'refuses: ' + answer['error'] if theirs is None else 'writes ' + theirs}"
            )
    refused = sum(ours is None for _, ours in checks)
    print(
        f"Kafka {oracle.version}: fields a version lacks, given a non-default value: {len(checks)} checked, "
        f"{refused} refused by both, {len(checks) - refused - len(problems)} dropped by both."
    )
    assert len(checks) > 50 and refused > 0
    assert not problems, f"{len(problems)} disagreements:\n" + "\n".join(problems[:SHOWN])


def java_class(name: str) -> str:
    """The class Kafka generates for a header or data type (RequestHeader -> RequestHeaderData)."""
    return name + "Data" if schema.spec(name)["type"] == "header" else name


def test_headers_and_data_types_agree_with_kafkas_java_codec(oracle):
    # The request and response headers of every frame, and the data types kproto reads
    # (group assignments, principals, KRaft control records): same checks, by class name.
    cases, missing = [], []
    for name, info in sorted(schema.MESSAGES.items()):
        if info["type"] in ("request", "response"):
            continue
        java = oracle.versions(java_class(name))
        lo, hi = info["valid_versions"]
        for version in range(lo, hi + 1):
            if java and java[0] <= version <= java[1]:
                cases.append((name, version, java_class(name)))
            else:
                missing.append((name, version))
    failing, problems, _known = check_cases(oracle, cases, {})
    print(
        f"Headers and data types: {len(cases)} (message, version) cases compared; "
        f"not in the Kafka {oracle.version} jar: {missing or 'none'}."
    )
    assert {name for name, _, _ in cases} >= {"RequestHeader", "ResponseHeader", "ConsumerProtocolAssignment"}
    assert not problems, f"{len(problems)} disagreements in {len(failing)} cases:\n" + "\n".join(problems[:SHOWN])


def _summary(cases: list[tuple]) -> str:
    """'key vLO-HI' per API, requests and responses together."""
    versions: dict[int, set[int]] = {}
    for key, version, _direction in cases:
        versions.setdefault(key, set()).add(version)
    return (
        ", ".join(
            f"{key} v{min(vs)}-{max(vs)}" if len(vs) > 1 else f"{key} v{min(vs)}"
            for key, vs in sorted(versions.items())
        )
        or "none"
    )


def test_oracle_reports_bad_input_without_stopping(oracle):
    # Truncated, over-long and malformed input each answer an error line, and the JVM goes on.
    answers = oracle.ask(
        [
            ("parse", "18:request", 3, "00"),  # truncated
            ("parse", "18:request", 0, "00"),  # a byte too many
            ("parse", "18:request", 0, "zz"),  # not hex
            ("parse", "9999:request", 0, ""),  # no such API
            ("parse", "NoSuchMessageData", 0, ""),  # no such class
            ("parse", "18:request", 99, ""),  # no such version
            ("encode", "18:request", 3, "{not json"),
            ("bogus",),
            ("parse", "18:request", 0, ""),  # and a good one after them
        ]
    )
    assert [a["ok"] for a in answers] == [False] * 8 + [True]
    assert answers[1]["error"] == "1 of 1 bytes left unread"
    assert answers[-1]["hex"] == "" and answers[-1]["json"] == {}


def test_a_stopped_oracle_is_an_error_not_a_hang():
    with _start(java_oracle.NEWEST_KAFKA) as stopped:
        stopped._proc.kill()
        stopped._proc.wait()
        with pytest.raises(OracleError, match="exited"):
            stopped.ask([("list",)])


def test_missing_jars_name_the_install_script(tmp_path, monkeypatch):
    monkeypatch.setenv("KPROTO_CACHE_DIR", str(tmp_path))
    with pytest.raises(OracleUnavailable, match="scripts/install-kafka.sh 4.4.0"):
        java_oracle.kafka_libs("4.4.0")
