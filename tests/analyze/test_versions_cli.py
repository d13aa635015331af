"""``kproto versions``: every mode's output, line by line."""

from __future__ import annotations

import re

import pytest

import kproto
from kproto import versions as v
from kproto.analyze.cli import main
from kproto.messages import ApiVersionsResponse


def run(capsys, *args: str) -> tuple[int, list[str], str]:
    status = main(["versions", *args])
    out, err = capsys.readouterr()
    return status, out.splitlines(), err


def response_frame(release: str, *, version: int = 3, size_prefixed: bool = True) -> bytes:
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(v.release_table(release).items())
        ],
    )
    return kproto.encode_response(body, version=version, correlation_id=7, size_prefixed=size_prefixed)


# ---------------------------------------------------------------- the API table
def test_api_table(capsys):
    status, lines, _ = run(capsys)
    assert status == 0
    header = lines[0].split()
    assert header[:4] == ["key", "name", "versions", "flexible"]
    rows = lines[1 : lines.index("")]
    assert len(rows) == len(v.api_table())
    by_key = {int(row.split()[0]): row.split() for row in rows}
    assert by_key[0] == ["0", "Produce", "0-13", "9+", "0-2", "0-2", "broker"]
    assert by_key[3] == ["3", "Metadata", "0-13", "9+", "0-3", "-", "broker"]
    assert by_key[4] == ["4", "LeaderAndIsr", "0-7", "4+", "-", "all", "(ZooKeeper)", "zkBroker"]
    assert by_key[17] == ["17", "SaslHandshake", "0-1", "-", "0", "-", "broker,controller"]
    assert by_key[38] == ["38", "CreateDelegationToken", "0-3", "2+", "0", "0", "broker,controller"]
    assert by_key[52] == ["52", "Vote", "0-2", "0+", "-", "-", "controller"]
    assert by_key[22][:2] == ["22", "InitProducerId"] and by_key[22][2] == "*"  # unstable latest (v6)
    notes = lines[lines.index("") + 1 :]
    assert notes[0] == f"{len(rows)} APIs. deprecated: versions KIP-896 marked for removal in Kafka 4.0."
    assert "Produce v0-2 are removed yet 4.0.0-4.4 still advertise them (KAFKA-18659)." in notes
    # every key a broker release advertises has a definition (88-94 came with the 4.x jars)
    assert not any("known-unknown" in note for note in notes), notes


def test_api_versions_lines(capsys):
    status, lines, _ = run(capsys, "--api", "Produce", "--api", "11")
    assert status == 0
    assert lines[0] == "Produce(0): kproto v0-13"
    assert lines[1] == (
        "  v0: releases 0.8.0-3.9; deprecated (KIP-896); removed in 4.x; "
        "advertised by 4.0.0-4.4 but rejected (KAFKA-18659, kept for librdkafka)"
    )
    assert lines[4] == "  v3: releases 0.11-4.4"  # 3.9.1+ deprecate only v0-2 (KAFKA-18659)
    assert lines[14] == "  v13: releases 4.1-4.4; flexible"
    assert lines[15] == "JoinGroup(11): kproto v0-9"
    assert lines[16] == "  v0: releases 0.9-3.9, 4.0-4.4; deprecated (KIP-896)"  # not 4.0.0
    assert len(lines) == 1 + 14 + 1 + 10


# ---------------------------------------------------------------- releases
def test_one_release(capsys):
    status, lines, _ = run(capsys, "--release", "3.9.1")
    assert status == 0
    table = v.release_table("3.9")
    assert lines[0] == f"Kafka 3.9 advertises {len(table)} APIs:"
    assert lines[1] == "  Produce(0): 0 to 11"
    assert "  SaslHandshake(17): 0 to 1" in lines
    assert "  DescribeProducers(61): 0" in lines
    assert len(lines) == 1 + len(table)


def test_changes_between_releases(capsys):
    status, lines, _ = run(capsys, "--release", "3.6", "--release", "4.0.0")
    assert status == 0
    old, new = v.release_table("3.6"), v.release_table("4.0.0")
    changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    assert lines[0] == f"Kafka 3.6 -> 4.0.0: {len(changed)} API(s) changed"
    assert lines[-1].startswith("  note: the 3.6 table is a ZooKeeper-mode broker's and the 4.0.0 table a KRaft")
    body = lines[1:-2]
    assert len(body) == len(changed)
    pattern = re.compile(r"  ([+~-]) (\w+)\((\d+)\): (.*)")
    seen = []
    for line, key in zip(body, changed):  # one line per changed API, by key
        sign, name, number, rest = pattern.fullmatch(line).groups()
        assert int(number) == key and name == v.api_name(key)
        expected_sign = "+" if key not in old else "-" if key not in new else "~"
        assert sign == expected_sign
        seen.append(key)
    assert seen == changed
    assert "  ~ Produce(0): v0-9 -> v0-12 (gained v10-12)" in body
    assert "  ~ Fetch(1): v0-15 -> v4-17 (gained v16-17, lost v0-3)" in body
    assert "  - LeaderAndIsr(4): API gone, was v0-7" in body
    assert "  + DescribeQuorum(55): new API, v0-2" in body
    both = [k for k in changed if k in old and k in new]
    versions = lambda r: set(range(r[0], r[1] + 1))  # noqa: E731
    gained = sum(len(versions(new[k]) - versions(old[k])) for k in both)
    lost = sum(len(versions(old[k]) - versions(new[k])) for k in both)
    assert lines[-2] == (
        f"  summary: {sum(k not in old for k in changed)} new API(s), "
        f"{sum(k not in new for k in changed)} API(s) gone, "
        f"{gained} version(s) gained and {lost} lost in the others"
    )
    assert (gained, lost) == (26, 26)


def test_three_releases_give_two_steps(capsys):
    status, lines, _ = run(capsys, "--release", "3.9", "--release", "4.0.0", "--release", "4.1")
    assert status == 0
    headers = [line for line in lines if line.startswith("Kafka ")]
    first = len(v.release_changes("3.9", "4.0.0"))
    assert headers == [f"Kafka 3.9 -> 4.0.0: {first} API(s) changed", "Kafka 4.0.0 -> 4.1: 18 API(s) changed"]
    assert lines.index(headers[1]) - lines.index(headers[0]) == 1 + first + 1 + 1  # changes, summary, blank
    assert "  ~ JoinGroup(11): v2-9 -> v0-9 (gained v0-1)" in lines
    assert "  + DescribeShareGroupOffsets(90): new API, v0" in lines


def test_a_change_of_mode_is_said(capsys):
    status, lines, _ = run(capsys, "--release", "3.8", "--release", "3.9")
    assert status == 0
    assert "  - LeaderAndIsr(4): API gone, was v0-7" in lines
    assert lines[-1] == (
        "  note: the 3.8 table is a ZooKeeper-mode broker's and the 3.9 table a KRaft-mode "
        "broker's: the APIs of each mode show as gone or new"
    )
    assert [v.release_mode(r) for r in ("0.8.0", "3.8", "3.9", "4.0.0", "4.4")] == [
        "ZooKeeper",
        "ZooKeeper",
        "KRaft",
        "KRaft",
        "KRaft",
    ]


def test_bad_release_exits_2(capsys):
    status, lines, err = run(capsys, "--release", "0.10", "--release", "4.0")
    assert status == 2 and lines == []
    assert err.strip() == "kproto versions: 0.10 is ambiguous: it could be 0.10.0, 0.10.1, 0.10.2"


# ---------------------------------------------------------------- a broker's response
def _listing(lines: list[str]) -> list[str]:
    start = lines.index("broker -> (")
    end = lines.index(")", start)
    return lines[start + 1 : end]


def test_response_from_a_39_broker(tmp_path, capsys):
    path = tmp_path / "av.bin"
    path.write_bytes(response_frame("3.9"))
    status, lines, _ = run(capsys, "--response", str(path))
    assert status == 0
    table = v.release_table("3.9")
    assert lines[0] == f"ApiVersionsResponse read as v3-4 (flexible): error NONE, {len(table)} APIs, correlation id 7"
    listing = _listing(lines)
    assert listing[0] == "\tProduce(0): 0 to 11 [usable: 11],"
    assert listing[1] == "\tFetch(1): 0 to 17 [usable: 17],"
    assert "\tDescribeProducers(61): 0 [usable: 0]," in listing
    assert "\tDescribeQuorum(55): 0 to 2 [usable: 2]," in listing  # a KRaft broker's API
    assert "\tShareFetch(78): UNSUPPORTED," in listing  # a client API 3.9 brokers do not advertise
    assert all(line.endswith(",") for line in listing[:-1]) and not listing[-1].endswith(",")
    client_facing = {i.api_key for i in v.api_table() if "broker" in i.listeners}
    assert len(listing) == len(set(table) | client_facing)

    at = lines.index(")") + 1
    assert lines[at] == (
        "Inferred release: 3.9 (exact match with the answer of a real 3.9.2 broker; "
        "patch releases that advertise the same versions are not told apart)"
    )
    negotiated = v.negotiate(None, "3.9")
    assert lines[at + 1] == f"kproto would negotiate {len(negotiated)} APIs:"
    negotiation = lines[at + 2 : at + 2 + len(negotiated)]
    assert negotiation[0] == "  Produce(0): v11"
    # the negotiated versions are the usable ones of the listing
    usable = dict(
        re.fullmatch(r"\t(\w+\(\d+\)): .* \[usable: (\d+)\],?", e).groups() for e in listing if "[usable" in e
    )
    assert {k: f"v{n}" for k, n in usable.items()} == dict(line.strip().split(": ") for line in negotiation)
    notes = lines[at + 2 + len(negotiated) :]
    assert notes[0] == "Notes:"
    assert "  Produce v0-2: served here, removed in Kafka 4.x" in notes
    assert "  Fetch v0-3: served here, removed in Kafka 4.x" in notes
    assert not any("LeaderAndIsr" in line for line in notes)  # a KRaft broker does not serve it


def test_response_from_a_41_broker_as_hex(tmp_path, capsys):
    path = tmp_path / "av.hex"
    path.write_text(response_frame("4.1", version=1, size_prefixed=False).hex(" ") + "\n")
    status, lines, _ = run(capsys, "--response", str(path))
    assert status == 0
    assert lines[0].startswith("ApiVersionsResponse read as v1-2: error NONE, ")
    listing = _listing(lines)
    assert listing[0] == "\tProduce(0): 0 to 13 [usable: 13],"
    assert "\tShareGroupHeartbeat(76): 1 [usable: 1]," in listing
    assert "\tGetTelemetrySubscriptions(71): UNSUPPORTED," in listing
    assert "\tDeleteShareGroupOffsets(92): 0 [usable: 0]," in listing
    assert any(line.startswith("Inferred release: 4.1 (exact match") for line in lines)
    notes = lines[lines.index("Notes:") + 1 :]
    assert notes == ["  Produce v0-2: advertised but rejected by 4.x brokers (KAFKA-18659)"]


def test_response_that_matches_no_release(tmp_path, capsys):
    table = v.release_table("4.0")
    table[0] = (3, 12)  # a broker that stopped advertising Produce v0-2
    body = ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in table.items()
        ],
    )
    path = tmp_path / "av.bin"
    path.write_bytes(kproto.encode_response(body, version=4, correlation_id=1))
    status, lines, _ = run(capsys, "--response", str(path), "--response-version", "4")
    assert status == 0
    assert lines[0].startswith("ApiVersionsResponse read as v4: ")
    at = next(i for i, line in enumerate(lines) if line.startswith("Inferred release:"))
    assert lines[at].startswith("Inferred release: no exact match; closest 4.0, 1 API(s) differ")
    assert lines[at + 1] == "  vs 4.0: Produce(0): advertised v3-12, release has v0-12"


def test_unsupported_version_answer(tmp_path, capsys):
    body = ApiVersionsResponse(
        error_code=35, api_keys=[ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=2)]
    )
    path = tmp_path / "av.bin"
    path.write_bytes(kproto.encode_response(body, version=0, correlation_id=3, size_prefixed=True))
    status, lines, _ = run(capsys, "--response", str(path))
    assert status == 0
    assert lines[0] == (
        "ApiVersionsResponse read as v0 (an UNSUPPORTED_VERSION answer): error UNSUPPORTED_VERSION, "
        "1 APIs, correlation id 3"
    )


@pytest.mark.parametrize("content", [b"", b"\x00\x01", b"not hex at all"])
def test_unreadable_response_exits_2(tmp_path, capsys, content):
    path = tmp_path / "bad"
    path.write_bytes(content)
    status, lines, err = run(capsys, "--response", str(path))
    assert status == 2 and lines == []
    assert err.startswith("kproto versions: not an ApiVersionsResponse in any wire form:")


def test_missing_file_exits_2(tmp_path, capsys):
    status, _, err = run(capsys, "--response", str(tmp_path / "nope"))
    assert status == 2 and "No such file" in err
