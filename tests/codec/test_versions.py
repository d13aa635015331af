"""kproto.versions: the API and release tables, negotiation (KIP-35, KIP-97), feature
checks, release inference and per-version facts, checked against the real release
tables (3.9, 4.0, 4.1 and the rest) in the generated data."""

from __future__ import annotations

import csv
import pickle

import pytest

import kproto
from kproto import broker_recordings
from kproto import versions as v
from kproto.errors import KprotoError
from kproto.messages import ApiVersionsResponse
from kproto.schema._messages import BROKER_API_VERSIONS, MESSAGES


def response_for(ranges: dict[int, tuple[int, int]]) -> ApiVersionsResponse:
    return ApiVersionsResponse(
        error_code=0,
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=k, min_version=lo, max_version=hi)
            for k, (lo, hi) in sorted(ranges.items())
        ],
    )


# ---------------------------------------------------------------- the API table
def test_api_table_has_every_request_with_its_facts():
    requests = {m["api_key"]: m for m in MESSAGES.values() if m["type"] == "request"}
    table = {info.api_key: info for info in v.api_table()}
    assert set(table) == set(requests)
    for key, info in table.items():
        m = requests[key]
        assert info.versions == m["valid_versions"]
        assert info.deprecated == m["deprecated_versions"]
        assert info.flexible_from == (m["flexible_versions"][0] if m["flexible_versions"] else None)


def test_api_table_rows_for_the_4x_baseline():
    produce = v.api_info("Produce")
    assert (produce.api_key, produce.versions, produce.flexible_from) == (0, (0, 13), 9)
    assert produce.deprecated == (0, 2)  # 3.9.0 marked 0-6; 3.9.1+ only 0-2 (KAFKA-18659) ...
    assert produce.removed_in_4x == (0, 2)  # ... which is what 4.x removed
    assert v.api_info("Fetch").removed_in_4x == (0, 3)
    metadata = v.api_info(3)
    assert metadata.deprecated == (0, 3) and metadata.removed_in_4x is None  # kept by 4.x
    assert v.api_info("LeaderAndIsr").removed_in_4x == (0, 7)
    assert v.api_info("LeaderAndIsr").removed_source == "ZooKeeper-only"
    assert v.api_info("CreateDelegationToken").removed_in_4x == (0, 0)
    assert v.api_info("CreateDelegationToken").removed_source == "4.x definitions"  # the 4.0 jar: 1-3
    assert v.api_info("Vote").removed_source == "4.x definitions" and v.api_info("Vote").removed_in_4x is None


def test_api_names_and_keys():
    assert v.api_key_of("ProduceRequest") == v.api_key_of("produce") == v.api_key_of(0) == 0
    assert v.api_key_of("ListClientMetricsResources") == 74  # the old name still resolves
    assert v.api_label(0) == "Produce(0)" and v.api_label(90) == "DescribeShareGroupOffsets(90)"
    assert v.api_label(200) == "UNKNOWN(200)"
    with pytest.raises(KeyError, match="unknown Kafka API"):
        v.api_key_of("NoSuchApi")
    assert v.api_info(90).name == "DescribeShareGroupOffsets"
    with pytest.raises(KeyError, match="no definition for api_key 200'$"):
        v.api_info(200)


# ---------------------------------------------------------------- the release table
def test_release_table_matches_the_reference_tsv(shared_protocol_dir):
    with open(shared_protocol_dir / "broker-api-versions.tsv", newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    expected: dict[str, dict[int, tuple[int, int]]] = {}
    for row in rows:
        expected.setdefault(row["release"], {})[int(row["api_key"])] = (
            int(row["min_version"]),
            int(row["max_version"]),
        )
    recorded = set(v.RECORDED_FROM)  # 3.9 and 4.x: from real brokers instead
    assert [r for r in v.RELEASES if r not in recorded] == [r for r in expected if r not in recorded]
    assert v.RELEASES[0] == "0.8.0" and v.RELEASES[-1] == "4.4"
    for release, table in expected.items():
        if release not in recorded:
            assert v.release_table(release) == table
    # where the reference and the real brokers differ, and why
    assert expected["4.0"] == v.release_table("4.0.0")  # the reference's 4.0 is 4.0.0
    assert expected["3.9"] == v.zookeeper_mode_table("3.9")  # and its 3.9 a ZooKeeper-mode broker
    assert all(expected[r] == v.release_table(r) for r in ("4.1", "4.2", "4.3"))


def test_recorded_releases_replace_the_reference_rows():
    rows = v.broker_api_versions()
    recorded = [row for row in rows if row[0] in v.RECORDED_FROM]
    assert recorded == list(broker_recordings.API_VERSIONS)
    assert list(v.RECORDED_FROM) == ["3.9", "4.0.0", "4.0", "4.1", "4.2", "4.3", "4.4"]
    assert [r for r in v.RELEASES if r in v.RECORDED_FROM] == list(v.RECORDED_FROM)  # by age
    assert {row[0] for row in rows if row[0] not in v.RECORDED_FROM} == {r for r, *_ in BROKER_API_VERSIONS} - set(
        v.RECORDED_FROM
    )


def test_real_tables_39_40_41():
    t39, t400, t40, t41 = (v.release_table(r) for r in ("3.9", "4.0.0", "4.0", "4.1"))
    assert (t39[0], t40[0], t41[0]) == ((0, 11), (0, 12), (0, 13))
    assert (t39[1], t40[1], t41[1]) == ((0, 17), (4, 17), (4, 18))
    assert 4 not in t39 and 4 in v.zookeeper_mode_table("3.9")  # LeaderAndIsr: ZooKeeper mode only
    # JoinGroup v0-1: dropped by 4.0.0, back in 4.0.1 (checked on a 4.0.1 broker too) and later
    assert (t39[11], t400[11], t40[11], t41[11]) == ((0, 9), (2, 9), (0, 9), (0, 9))
    assert {k: r for k, r in t400.items() if t40.get(k) != r} == {11: (2, 9)}
    assert v.KNOWN_UNKNOWN_API_KEYS == frozenset()  # 88-94 have definitions since the 4.x jars
    assert {90, 91, 92} <= set(t41) and {93, 94} <= set(v.release_table("4.4"))


def test_releases_are_resolved_from_version_strings():
    assert v.resolve_release("3.6.1") == "3.6"
    assert v.resolve_release("0.10.2.1") == "0.10.2"
    assert v.resolve_release("0.9.0.1") == "0.9"
    assert v.resolve_release("v4.0") == "4.0"
    assert v.resolve_release("4.0.0") == "4.0.0" and v.resolve_release("4.0.1") == "4.0"
    with pytest.raises(ValueError, match="ambiguous.*0.10.0, 0.10.1, 0.10.2"):
        v.resolve_release("0.10")
    with pytest.raises(ValueError, match="no broker release 5.0"):
        v.resolve_release("5.0")
    with pytest.raises(ValueError, match="not a Kafka release"):
        v.resolve_release("latest")
    assert v.releases_between("3.8", "4.1") == ("3.8", "3.9", "4.0.0", "4.0", "4.1")


def test_every_4x_release_honours_the_4x_definitions_except_produce_0_to_2():
    """4.x brokers never advertise a version below the 4.x definitions' floor, except
    Produce v0-2 (KAFKA-18659), in every 4.x release."""
    releases_4x = [r for r in v.RELEASES if r.startswith("4.")]
    assert releases_4x == ["4.0.0", "4.0", "4.1", "4.2", "4.3", "4.4"]
    exceptions = {}
    by_key = {info.api_key: info for info in v.api_table()}
    for release in releases_4x:
        for key, (lo, _hi) in v.release_table(release).items():
            info = by_key.get(key)
            if info and info.removed_source == "4.x definitions" and info.removed_in_4x:
                if lo <= info.removed_in_4x[1]:
                    exceptions.setdefault(release, {})[key] = (lo, info.removed_in_4x[1])
    assert exceptions == {r: {0: (0, 2)} for r in releases_4x}
    assert v.ADVERTISED_BUT_REJECTED == exceptions


def test_39_still_serves_every_version_kip896_deprecated():
    t39 = v.release_table("3.9")
    for info in v.api_table():
        if info.deprecated and info.api_key in t39:
            lo, hi = t39[info.api_key]
            assert lo <= info.deprecated[0] and info.deprecated[1] <= hi, info.name


def test_4x_removals_were_deprecated_first_but_writetxnmarkers_v0():
    undeprecated = []
    for info in v.api_table():
        if info.removed_source == "4.x definitions" and info.removed_in_4x:
            for version in range(info.removed_in_4x[0], info.removed_in_4x[1] + 1):
                if not (info.deprecated and info.deprecated[0] <= version <= info.deprecated[1]):
                    undeprecated.append((info.name, version))
    # inter-broker: 4.0 dropped them without a KIP-896 marker
    assert undeprecated == [("WriteTxnMarkers", 0), ("AlterPartition", 0), ("AlterPartition", 1)]


# ---------------------------------------------------------------- per (api, version)
def test_version_info_produce():
    old = v.version_info("Produce", 2)
    assert old.deprecated and old.removed_in_4x
    assert (old.first_release, old.last_release) == ("0.10.0", "3.9")
    assert old.advertised_but_rejected == ("4.0.0", "4.0", "4.1", "4.2", "4.3", "4.4")
    assert any("KAFKA-18659" in n for n in old.notes)
    kept = v.version_info("Produce", 3)
    assert not kept.deprecated and kept.removed_in_4x is False  # 3.9.1+ deprecate only 0-2
    assert (kept.first_release, kept.in_latest_release) == ("0.11", True)
    newest = v.version_info("Produce", 13)
    assert newest.flexible and not newest.deprecated and newest.first_release == "4.1"


def test_version_info_gaps_and_unknowns():
    join = v.version_info("JoinGroup", 0)
    assert join.deprecated and join.removed_in_4x is False
    assert "4.0.0" not in join.releases and {"3.9", "4.0", "4.1"} <= set(join.releases)
    assert v.format_releases(join.releases) == "0.9-3.9, 4.0-4.4"
    assert v.version_info("Metadata", 0).releases == v.RELEASES
    zk = v.version_info("LeaderAndIsr", 7)
    assert zk.removed_in_4x and zk.last_release == "3.8"  # 3.9's table is a KRaft broker's
    assert v.version_info("Vote", 0).removed_in_4x is False  # the 4.x jars define Vote 0-2
    share_offsets = v.version_info(90, 0)
    assert share_offsets.defined and share_offsets.first_release == "4.1"
    assert not v.version_info(200, 0).defined
    assert not v.version_info("Produce", 14).defined


# ---------------------------------------------------------------- negotiation
@pytest.mark.parametrize(
    "release, produce, fetch, metadata", [("3.9", 11, 17, 12), ("4.0", 12, 17, 13), ("4.1", 13, 18, 13)]
)
def test_negotiate_with_real_brokers(release, produce, fetch, metadata):
    chosen = v.negotiate(None, release)
    assert (chosen[0], chosen[1], chosen[3]) == (produce, fetch, metadata)
    table = v.release_table(release)
    for key, version in chosen.items():  # always inside both ranges
        assert table[key][0] <= version <= table[key][1]
        assert v.api_info(key).min_version <= version <= v.api_info(key).max_version


def test_negotiate_picks_the_highest_common_version():
    assert v.negotiate({0: (3, 9)}, {0: (0, 11)}) == {0: 9}
    assert v.negotiate({0: (3, 13)}, {0: (0, 2)}) == {}
    assert v.negotiate({"Fetch": (4, 12)}, [(1, 0, 17)]) == {1: 12}


def test_obsolete_broker_version_names_api_and_both_ranges():
    with pytest.raises(v.ObsoleteBrokerVersion) as caught:
        v.negotiate({0: (3, 13)}, {0: (0, 2)}, required=["Produce"])
    error = caught.value
    assert isinstance(error, KprotoError)
    assert (error.api_key, error.client_range, error.broker_range) == (0, (3, 13), (0, 2))
    assert str(error) == "no common version of Produce(0): client supports v3-13, broker supports v0-2 (broker too old)"
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error)
    with pytest.raises(v.ObsoleteBrokerVersion, match="Fetch\\(1\\): the broker does not offer it at all"):
        v.negotiate(None, {0: (0, 11)}, required=[1])
    with pytest.raises(v.ObsoleteBrokerVersion, match="broker too new"):
        v.negotiate({76: (0, 0)}, "4.1", required=True)  # share groups moved to v1 in 4.1


def test_old_brokers_fail_required_apis():
    v.negotiate(None, "0.10.0", required=["Produce", "Fetch", "Metadata", "ApiVersions"])
    with pytest.raises(v.ObsoleteBrokerVersion, match="ApiVersions\\(18\\)"):
        v.negotiate(None, "0.9", required=["ApiVersions"])  # KIP-35 arrived in 0.10.0
    with pytest.raises(v.ObsoleteBrokerVersion):
        v.negotiate(None, "3.9", required=True)  # every kproto API: 3.9 lacks some


def test_kafka_4x_baseline_avoids_advertised_but_rejected_versions():
    old_client = {0: (0, 2)}
    assert v.negotiate(old_client, "4.0") == {0: 2}  # what the broker advertises ...
    assert v.negotiate(old_client, "4.0", kafka_4x_baseline=True) == {}  # ... but rejects
    with pytest.raises(v.ObsoleteBrokerVersion):
        v.negotiate({0: (0, 13)}, {0: (0, 2)}, required=[0], kafka_4x_baseline=True)
    baseline = v.baseline_4x(v.kproto_ranges())
    assert baseline[0] == (3, 13) and baseline[1] == (4, 18) and 4 not in baseline


def test_several_brokers_combine_into_what_all_support():
    rolling = v.negotiate(None, ["3.9", "4.0"])  # a cluster half-way through an upgrade
    assert (rolling[0], rolling[1]) == (11, 17)
    assert 4 not in rolling  # LeaderAndIsr: only the 3.9 broker has it
    assert v.cluster_ranges(["3.9", "4.0"])[1] == (4, 17)
    assert v.cluster_ranges([{0: (0, 1)}, {0: (3, 4)}]) == {}  # no version works on both
    assert v.cluster_ranges([]) == {}


def test_ranges_from_responses():
    body = response_for({0: (0, 11), 18: (0, 4)})
    assert v.as_ranges(body) == {0: (0, 11), 18: (0, 4)}
    frame = kproto.encode_response(body, version=3, correlation_id=1)
    decoded = kproto.decode_response(frame, 18, 3)
    assert v.as_ranges(decoded) == {0: (0, 11), 18: (0, 4)}
    assert v.negotiate(None, [decoded, body]) == {0: 11, 18: 4}


# ---------------------------------------------------------------- features (KIP-35)
# KIP-35's worked example ("A client developer wants to add support for a new feature"):
# brokers B1 and B2 answer with (ApiKey, MinVersion, MaxVersion) triples, the client
# builds the cluster-wide state (0, 1, 2), (1, 2, 3), and checks its features.
B1 = [(0, 0, 3), (1, 2, 3)]
B2 = [(0, 1, 2), (1, 0, 3), (2, 0, 0)]
FEATURES = {
    "Feature1": {(0, 3, 3), (1, 2, 3)},
    "Feature2": {(0, 1, 2), (1, 2, 3)},
}


def test_kip35_worked_example():
    assert v.cluster_ranges([B1, B2]) == {0: (1, 2), 1: (2, 3)}
    checks = v.check_features(FEATURES, [B1, B2])
    assert checks["Feature1"].usable is False
    assert checks["Feature1"].problems == ["Produce v3 needed, offered as v1-2"]
    assert checks["Feature2"].usable is True
    assert checks["Feature2"].versions == {0: 2, 1: 3}
    # each broker alone can serve Feature1: only the cluster as a whole cannot
    assert v.check_features(FEATURES, [B1])["Feature1"].usable
    assert not v.check_features(FEATURES, [B2])["Feature1"].usable


def test_features_against_real_releases():
    features = {
        "idempotent produce with topic ids": {("Produce", 12, 13)},
        "KIP-848 consumer": {("ConsumerGroupHeartbeat", 1, 1)},
        "classic consumer": {("JoinGroup", 0, 9), ("SyncGroup", 0, 5), ("Heartbeat", 0, 4)},
    }
    on_39 = v.check_features(features, "3.9")
    assert [n for n, c in on_39.items() if c.usable] == ["classic consumer"]
    on_41 = v.check_features(features, "4.1")
    assert all(c.usable for c in on_41.values())
    mixed = v.check_features(features, ["3.9", "4.1"])
    assert not mixed["KIP-848 consumer"].usable
    assert mixed["KIP-848 consumer"].problems == ["ConsumerGroupHeartbeat v1 needed, offered as v0"]


# ---------------------------------------------------------------- release inference
@pytest.mark.parametrize("release", v.RELEASES)
def test_every_release_table_is_recognised_exactly(release):
    match = v.infer_release(response_for(v.release_table(release)))
    assert match.exact == (release,) and match.release == release


def test_recorded_releases_say_which_broker_answered_so():
    match = v.infer_release(v.release_table("4.0"))
    assert match.describe() == (
        "4.0 (exact match with the answer of a real 4.0.2 broker; "
        "patch releases that advertise the same versions are not told apart)"
    )
    assert (
        v.infer_release(v.release_table("4.0.0"))
        .describe()
        .startswith("4.0.0 (exact match with the answer of a real 4.0.0 broker")
    )


def test_a_zookeeper_mode_39_broker_is_named_with_its_mode():
    match = v.infer_release(v.zookeeper_mode_table("3.9"))
    assert (match.exact, match.mode, match.release) == (("3.9",), "ZooKeeper", "3.9")
    assert match.describe().startswith("3.9 in ZooKeeper mode (exact match")


def test_inference_states_differences_without_guessing():
    table = v.release_table("4.1")
    del table[90]
    match = v.infer_release(table)
    assert match.release is None and match.exact == ()
    assert match.closest == ("4.1",)
    assert match.differences["4.1"] == ("DescribeShareGroupOffsets(90): not advertised, release has v0",)
    assert match.describe().startswith("no exact match; closest 4.1, 1 API(s) differ")


def test_inference_tie_is_stated():
    # half-way between two consecutive releases: equally close to both
    for older, newer in zip(v.RELEASES, v.RELEASES[1:]):
        a, b = v.release_table(older), v.release_table(newer)
        differing = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        if len(differing) >= 2 and len(differing) % 2 == 0 and all(k in a and k in b for k in differing):
            break
    mixed = dict(a)
    for key in differing[: len(differing) // 2]:
        mixed[key] = b[key]
    match = v.infer_release(mixed)
    assert match.release is None
    assert set(match.closest) >= {older, newer}
    assert "a tie" in match.describe()


def test_exact_ambiguity_is_stated():
    match = v.ReleaseMatch(("3.4", "3.5"), (), {})
    assert match.release is None
    assert match.describe() == (
        "ambiguous: 3.4, 3.5 advertise identical versions; ApiVersions alone cannot tell them apart"
    )


# ---------------------------------------------------------------- release changes
def test_changes_between_39_and_40():
    changes = {c.api_key: c for c in v.release_changes("3.9", "4.0.0")}
    assert changes[0].gained == [12] and changes[0].lost == []
    assert changes[1].lost == [0, 1, 2, 3] and changes[1].gained == []
    assert changes[11].describe() == "~ JoinGroup(11): v0-9 -> v2-9 (lost v0-1)"
    assert 12 not in changes  # Heartbeat did not change
    # 3.8's table is a ZooKeeper-mode broker's, 3.9's a KRaft broker's: the mode shows
    mode = {c.api_key: c for c in v.release_changes("3.8", "3.9")}
    assert mode[4].describe() == "- LeaderAndIsr(4): API gone, was v0-7"
    assert mode[55].describe() == "+ DescribeQuorum(55): new API, v0-2"
    t39, t40 = v.release_table("3.9"), v.release_table("4.0.0")
    assert set(changes) == {k for k in set(t39) | set(t40) if t39.get(k) != t40.get(k)}


def test_changes_between_40_and_41_only_gain():
    changes = v.release_changes("4.0.0", "4.1")
    assert all(not c.lost for c in changes)
    by_key = {c.api_key: c for c in changes}
    assert by_key[11].gained == [0, 1]
    assert by_key[90].describe() == "+ DescribeShareGroupOffsets(90): new API, v0"
    assert [c.describe() for c in v.release_changes("4.0.0", "4.0")] == ["~ JoinGroup(11): v2-9 -> v0-9 (gained v0-1)"]


def test_broker_api_versions_rows_are_well_formed():
    for release, key, lo, hi in BROKER_API_VERSIONS:
        assert 0 <= lo <= hi, (release, key)
