"""The recordings of real brokers (kproto/broker_recordings.py) against kproto's own facts,
and tools/kafka_broker.py's pieces that need no broker (issue 36).

No broker is started here: tests/analyze/test_kafka_brokers.py (``make test-kafka``) checks that
live brokers still answer what was recorded.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from kproto import broker_recordings
from kproto import versions as v

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import kafka_broker  # noqa: E402  (tools/ is no package)
import record_brokers  # noqa: E402

PROBES = broker_recordings.PROBES


def test_every_checked_release_is_recorded():
    assert sorted(broker_recordings.RECORDED_FROM.values()) == sorted(kafka_broker.releases())
    assert {record_brokers.table_name(r) for r in kafka_broker.releases()} == set(broker_recordings.RECORDED_FROM)
    for name in broker_recordings.RECORDED_FROM:
        assert {(k, ver) for r, k, ver, *_ in PROBES if r == name} == set(record_brokers.probe_plan()), (
            f"{name}: kproto's removal tables changed since the recording: run tools/record_brokers.py"
        )


def test_probe_outcomes_are_answers_or_closed_connections():
    assert {outcome for *_, outcome, _detail in PROBES} == {"answered", "closed"}
    # a version a broker does not serve: it closes the connection, never an UNSUPPORTED_VERSION answer
    assert not [p for p in PROBES if "UNSUPPORTED_VERSION" in p[4]]


def test_kproto_facts_say_what_each_real_broker_served():
    """Per release, per probed (API, version): kproto's "releases that serve it" holds the
    release exactly when the real broker answered."""
    wrong = [
        (release, v.api_label(key), version, outcome)
        for release, key, version, outcome, _ in PROBES
        if (release in v.version_info(key, version).releases) != (outcome == "answered")
    ]
    assert wrong == []


def test_removed_in_4x_against_the_real_4x_brokers():
    served: dict[tuple[int, int], set[str]] = {}
    for release, key, version, outcome, _ in PROBES:
        if release.startswith("4.") and outcome == "answered":
            served.setdefault((key, version), set()).add(release)
    releases_4x = {r for r in broker_recordings.RECORDED_FROM if r.startswith("4.")}
    advertised_4x = {key for r in releases_4x for key in v.release_table(r)}
    for key, version in record_brokers.probe_plan():
        if key not in advertised_4x:
            continue  # a controller's API (AlterPartition): a broker's listener never serves it
        info = v.version_info(key, version)
        if info.removed_in_4x:
            assert not served.get((key, version)), (info.name, version)  # no 4.x broker serves it
        elif info.removed_in_4x is False:
            assert served.get((key, version)), (info.name, version)  # some 4.x broker does
    # the one version kproto calls kept that a 4.x release refuses: JoinGroup v0-1 on 4.0.0
    partial = {(v.api_name(k), ver): releases_4x - s for (k, ver), s in served.items() if s != releases_4x}
    assert partial == {("JoinGroup", 0): {"4.0.0"}, ("JoinGroup", 1): {"4.0.0"}}


def test_produce_0_to_2_are_advertised_yet_refused_by_every_4x_broker():
    for release in (r for r in broker_recordings.RECORDED_FROM if r.startswith("4.")):
        assert v.release_table(release)[0][0] == 0
        outcomes = {ver: outcome for r, key, ver, outcome, _ in PROBES if r == release and key == 0}
        assert [outcomes[ver] for ver in range(4)] == ["closed", "closed", "closed", "answered"], release
        assert v.ADVERTISED_BUT_REJECTED[release] == {0: (0, 2)}


def test_39_serves_every_deprecated_version_and_no_zookeeper_api():
    outcomes = Counter((v.api_info(k).removed_source == "ZooKeeper-only", o) for r, k, _, o, _ in PROBES if r == "3.9")
    assert set(outcomes) == {(False, "answered"), (True, "closed"), (False, "closed")}
    closed = {v.api_name(k) for r, k, _, o, _ in PROBES if r == "3.9" and o == "closed"}
    # a KRaft broker: no ZooKeeper inter-broker API, and AlterPartition goes to the controller
    assert closed == {"LeaderAndIsr", "StopReplica", "UpdateMetadata", "AlterPartition"}


# ---------------------------------------------------------------- tools/kafka_broker.py without a broker
def test_releases_come_from_the_install_script():
    releases = kafka_broker.releases()
    assert releases[0] == "3.9.2" and "4.0.0" in releases and len(releases) == len(set(releases))
    assert kafka_broker.resolve("4.0") == max(
        (r for r in releases if r.startswith("4.0.")), key=kafka_broker.release_key
    )
    with pytest.raises(kafka_broker.BrokerError, match="no release '5.0'"):
        kafka_broker.resolve("5.0")


def test_a_missing_release_names_the_install_script(tmp_path, monkeypatch):
    monkeypatch.setenv("KPROTO_CACHE_DIR", str(tmp_path))
    with pytest.raises(kafka_broker.BrokerError, match=r"run scripts/install-kafka.sh 4\.4\.0"):
        kafka_broker.start("4.4.0")
    assert list(tmp_path.iterdir()) == []  # nothing made before failing


def test_a_missing_java_is_said(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(kafka_broker.BrokerError, match="java is not on PATH"):
        kafka_broker.java()


def test_server_properties_have_the_three_listeners(tmp_path):
    text = kafka_broker.server_properties(tmp_path / "data", 1001, 1002, 1003)
    props = dict(line.split("=", 1) for line in text.splitlines())
    assert props["listeners"] == (
        "PLAINTEXT://127.0.0.1:1001,SASL_PLAINTEXT://127.0.0.1:1002,CONTROLLER://127.0.0.1:1003"
    )
    assert props["controller.quorum.voters"] == "1@127.0.0.1:1003"
    assert props["process.roles"] == "broker,controller"
    assert (
        f'user_{kafka_broker.SASL_USER}="{kafka_broker.SASL_PASSWORD}"'
        in props["listener.name.sasl_plaintext.plain.sasl.jaas.config"]
    )


def test_cluster_ids_are_kafka_uuids_that_no_parser_takes_for_an_option():
    ids = [kafka_broker.new_cluster_id() for _ in range(500)]
    assert all(len(i) == 22 and not i.startswith("-") for i in ids) and len(set(ids)) == 500


def test_free_ports_differ():
    ports = kafka_broker.free_ports(3)
    assert len(set(ports)) == 3 and all(1024 <= p < 65536 for p in ports)


class _FakeProcess:
    def __init__(self) -> None:
        self.returncode = None

    def poll(self):
        return self.returncode


def test_the_pool_keeps_one_broker_alive_and_notices_a_dead_one(tmp_path):
    made, stopped = [], []

    def starter(release):
        broker = kafka_broker.Broker(release, tmp_path / release, 1, 2, 3, process=_FakeProcess())
        broker.stop = lambda *a, **k: stopped.append(release)  # no process to end here
        made.append(release)
        return broker

    pool = kafka_broker.BrokerPool(starter)
    first = pool.get("4.4")
    assert pool.get("4.4.0") is first and made == ["4.4.0"]
    pool.get("3.9.2")
    assert made == ["4.4.0", "3.9.2"] and stopped == ["4.4.0"]
    pool.current.process.returncode = 1
    with pytest.raises(kafka_broker.BrokerError, match="3.9.2 died during the tests"):
        pool.get("3.9.2")
    pool.close()
    assert stopped == ["4.4.0", "3.9.2"] and pool.started == ["4.4.0", "3.9.2"]
