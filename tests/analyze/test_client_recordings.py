"""The recording of real clients against real brokers (kproto/analyze/client_recordings.py, issue 37).

The plain tests check the committed recording is whole and consistent, and that the KIP-896
truth table in docs/analyze.md is the one the recording gives. The ``kafka`` tests drive a
client again against a real broker and check it still does what the recording says: they
need scripts/install-kafka.sh and scripts/install-clients.sh to have run (a missing install
is a failure naming the script, not a skip).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kproto.analyze import client_recordings as R
from kproto.analyze.fingerprint import release_key

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import record_clients as RC  # noqa: E402

LIBRARIES_4X = {
    "kafka-clients",
    "kafka-python",
    "aiokafka",
    "confluent-kafka",
    "kcat",
    "franz-go",
    "sarama",
    "kafka-go",
    "kafkajs",
}


def test_every_run_is_whole():
    assert R.RUNS
    for library, release, pin, broker, works, steps, _log, unanswered, cut, _errors, clients in R.RUNS:
        label = (library, release, pin, broker)
        assert broker in R.BROKERS, label
        assert pin is None or pin == R.PINS[library], label
        assert steps and works == all(outcome == "ok" for outcome in steps.values()), label
        assert all(outcome == "ok" or outcome.startswith("FAILED") for outcome in steps.values()), label
        assert bool(unanswered) == bool(cut), label
        if works:
            assert clients, label  # a run that worked was seen on the wire
        for _client_id, order, software, _handshakes in clients:
            assert len(set(order)) == len(order), label  # pairs in order of first use, each once
            assert software is None or len(software) == 2, label


def test_each_client_release_ran_against_every_broker_with_its_pin():
    seen: dict[tuple, set] = {}
    for library, release, pin, broker, *_ in R.RUNS:
        seen.setdefault((library, release, pin), set()).add(broker)
    brokers = {broker for _l, _r, _p, broker, *_ in R.RUNS}
    for (library, release, pin), ran in seen.items():
        # every broker, but a share consumer's: those that serve share groups (4.2+)
        assert ran == {broker for broker in brokers if RC.serves(broker, release)}, (library, release, pin)
        if library in R.PINS:
            assert (library, release, R.PINS[library]) in seen and (library, release, None) in seen


def test_the_recording_covers_the_ecosystems():
    assert {run[0] for run in R.RUNS} >= LIBRARIES_4X - {library.split("/")[0] for library in R.NOT_RECORDED}
    assert len({run[0] for run in R.RUNS}) >= 8


def test_a_share_consumer_is_recorded_where_share_groups_are_served():
    """KIP-932: the Java client's KafkaShareConsumer against the brokers that serve share groups (4.2+): it
    works, and its share group's clients sent ShareGroupHeartbeat, ShareFetch and ShareAcknowledge."""
    runs = [run for run in R.RUNS if run[1].endswith(RC.SHARE_CONSUMER)]
    assert runs and {run[3] for run in runs} == {b for b in R.BROKERS if RC.serves(b, runs[0][1])} != set(R.BROKERS)
    for run in runs:
        assert run[0] == "kafka-clients" and run[4], run[:6]
        shared = [order for client_id, order, _sw, _h in run[-1] if client_id.endswith("-group")]
        assert shared and {76, 78, 79} <= {api for api, _v in shared[0]}, run[-1]
    assert not RC.serves("4.1.2", runs[0][1]) and RC.serves("3.9.2", "4.4.0")


def test_a_failure_on_4x_has_a_symptom():
    for row in RC.truth_rows(R.RUNS):
        library, release, pin, failed, answer, symptom = row
        if any(failed[broker] for broker in failed if broker.startswith("4")):
            assert answer and symptom and symptom != "works", row
        else:
            assert (answer, symptom) == ("", ""), row


def test_the_client_own_release_line_works_against_its_broker():
    # Apache Kafka's own Java client of a release works against the broker of that release:
    # the drivers and the recorder are sound where nothing can be wrong but them.
    for library, release, _pin, broker, works, steps, *_ in R.RUNS:
        if library == "kafka-clients" and release == broker:
            assert works, (release, steps)


def test_docs_show_the_truth_table():
    text = (ROOT / "docs" / "analyze.md").read_text(encoding="utf-8")
    assert RC.truth_markdown(R.RUNS) in text


def test_truth_rows_are_ordered_by_release():
    rows = RC.truth_rows(R.RUNS)
    for a, b in zip(rows, rows[1:]):
        if a[0] == b[0]:
            assert (release_key(a[1]), a[2] or "") <= (release_key(b[1]), b[2] or "")


# ---------------------------------------------------------------- against real brokers
def _installed(library: str, release: str) -> RC.Client:
    clients, failed = RC.installed()
    for client in clients:
        if (client.library, client.release) == (library, release):
            return client
    raise AssertionError(
        f"{library} {release} is not installed: run scripts/install-clients.sh "
        f"({failed.get(library, 'not in the cache')})"
    )


def _recorded(library: str, release: str, pin, broker: str):
    return next(run for run in R.RUNS if run[:4] == (library, release, pin, broker))


@pytest.mark.kafka
@pytest.mark.slow
@pytest.mark.parametrize("library, release, pin", [("kafka-python", "3.0.12", "0.10.1"), ("kafkajs", "2.2.4", None)])
def test_a_client_does_again_what_the_recording_says(tmp_path, library, release, pin):
    import kafka_broker

    client = _installed(library, release)
    recorded = _recorded(library, release, pin, "4.0.2")
    with kafka_broker.start("4.0.2") as broker:
        output, _seconds = RC.capture_run(broker, client, pin, tmp_path / "run.pcap")
        facts = RC.wire_facts(tmp_path / "run.pcap", broker.plaintext_port)
    steps, _log = RC.summarise(output)
    assert (all(v == "ok" for v in steps.values())) == recorded[4], (steps, recorded[5])
    assert facts["unanswered"] == list(recorded[7])


@pytest.mark.kafka
@pytest.mark.slow
def test_the_share_consumer_does_again_what_the_recording_says(tmp_path):
    import kafka_broker

    client = _installed("kafka-clients", "4.4.0" + RC.SHARE_CONSUMER)
    recorded = _recorded(client.library, client.release, None, "4.4.0")
    with kafka_broker.start("4.4.0") as broker:
        output, _seconds = RC.capture_run(broker, client, None, tmp_path / "run.pcap")
        facts = RC.wire_facts(tmp_path / "run.pcap", broker.plaintext_port)
    steps, _log = RC.summarise(output)
    assert steps == recorded[5]
    assert {(c["client_id"], tuple(c["order"])) for c in facts["clients"]} == {(c[0], c[1]) for c in recorded[-1]}
