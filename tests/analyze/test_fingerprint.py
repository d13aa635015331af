"""kproto.analyze.fingerprint: the table built from the real-broker recording, the classifier, its figures."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from kproto.analyze import client_recordings as R
from kproto.analyze import fingerprint as FP
from kproto.analyze import fingerprint_scoring as scoring
from tests import fingerprint_evaluation as evaluation

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------- the table, from kproto/analyze/client_recordings.py
def test_the_table_is_the_recording():
    """Every recorded library and release is in the table, nothing else: nine libraries, four ecosystems."""
    table = FP.table()
    assert set(table.releases) == {run[0] for run in R.RUNS}
    assert {(lib, rel) for lib, rels in table.releases.items() for rel in rels} == {run[:2] for run in R.RUNS}
    assert len(table.releases) >= 9 and {
        "kafka-clients",
        "confluent-kafka",
        "kafka-python",
        "franz-go",
        "kafkajs",
    } <= set(table.releases)
    assert len(table.runs) == len(R.RUNS)
    for releases in table.releases.values():
        assert list(releases) == sorted(releases, key=FP.release_key)


def test_default_client_ids_come_from_the_recording():
    table = FP.table()
    assert table.id_libraries("producer-7") == {"kafka-clients"}
    assert table.id_libraries("kafka-python-producer-3") == {"kafka-python"}
    assert table.id_libraries("aiokafka-producer-12") == {"aiokafka"}
    assert table.id_libraries("rdkafka") == {"confluent-kafka", "kcat"}
    assert table.id_libraries("kgo") == {"franz-go"} and table.id_libraries("sarama") == {"sarama"}
    assert table.id_libraries("kafkajs") == {"kafkajs"}
    assert table.id_libraries("") == {"kafka-go"}  # kafka-go 0.4 sends an empty client.id
    assert table.id_libraries("alice@build-7 (github.com/segmentio/kafka-go)") == {"kafka-go"}
    assert table.id_libraries("my-service") == set() and table.id_libraries(None) == set()


def _no_wrong_library_at_high(result: dict) -> None:
    assert result["wrong_library_high"] == 0, [w for w in result["wrong"] if w[6] == FP.HIGH]


def test_recorded_clients_are_named_right():
    """The table's own clients: as the clients table names them (KIP-511 first) and by the wire alone,
    the right library for at least 90 %, and a wrong one is never `high`."""
    clients = scoring.recorded_clients(R.RUNS)
    named = scoring.evaluate(clients)
    assert named["right_library"] >= 0.95 * named["clients"], named["wrong"]
    _no_wrong_library_at_high(named)
    wire = scoring.evaluate(clients, kip511=False)
    assert wire["right_library"] >= 0.9 * wire["clients"], wire["wrong"]
    _no_wrong_library_at_high(wire)


def test_no_true_kip511_name_is_contradicted():
    """Every KIP-511 name the recorded clients sent is true: none is called contradicted."""
    table = FP.table()
    for library, release, _pin, broker, *_rest, clients in R.RUNS:
        for client_id, order, software, handshakes in clients:
            if software:
                verdict = table.classify(client_id, order, software[0], software[1], handshakes)
                assert verdict.mismatch is None, (library, release, broker, client_id, verdict.mismatch)


def test_a_release_between_recorded_ones_is_no_contradiction():
    """confluent-kafka 2.1.1 sends what 2.2.0 does, kafka-python 1.4.6 what 1.4.7 does: their names stand.
    A version newer than its release ever sent rules the name out."""
    table = FP.table()
    rdkafka_220 = next(
        order
        for run in R.RUNS
        if run[:3] == ("confluent-kafka", "2.2.0", None)
        for _id, order, *_x in run[-1]
        if len(order) > 5
    )
    assert table.classify("app", rdkafka_220, "confluent-kafka-python", "2.1.1-rdkafka-2.1.1").mismatch is None
    assert table.classify("app", [(18, 0), (3, 0), (3, 1), (0, 3)], "kafka-python", "1.4.6").mismatch is None
    newer = table.classify("app", [(18, 0), (3, 1), (0, 9)], "kafka-python", "1.4.6")
    assert newer.library == "kafka-python" and "rules it out" in newer.mismatch and "Produce v9" in newer.mismatch
    # Versions older than recorded (an older broker, a pin) rule nothing out.
    assert table.classify("app", [(18, 3), (3, 1), (0, 3)], "apache-kafka-java", "3.9.2").mismatch is None


def test_leave_one_release_out():
    """Each recorded release named by a table built without it. KIP-511 first (the clients table):
    never a wrong library at `high`. By the wire alone the only wrong `high` verdicts are librdkafka's
    two front ends named as each other (the same C library: the same wire and default client.id)."""
    named = scoring.leave_one_out(R.RUNS, "release", kip511=True)
    _no_wrong_library_at_high(named)
    assert named["right_library"] >= 0.6 * named["clients"]
    wire = scoring.leave_one_out(R.RUNS, "release")
    assert {(w[0], w[4]) for w in wire["wrong"] if w[6] == FP.HIGH} <= {
        ("kcat", "confluent-kafka"),
        ("confluent-kafka", "kcat"),
    }


def test_software_outside_the_table_is_unknown_or_a_guess():
    """Each library held out of the table: its clients are named `unknown`, or at most a medium-confidence
    guess (but librdkafka's front ends by the wire alone, above); never a wrong library at `high`."""
    named = scoring.leave_one_out(R.RUNS, "library", kip511=True)
    _no_wrong_library_at_high(named)
    assert named["unknown"] > 0
    verdict = FP.table().classify_wire("my-app", [(18, 4), (3, 13), (60, 2), (999, 0)], 1)
    assert verdict.confidence != FP.HIGH


def test_unknown_software_says_its_nearest_match():
    verdict = FP.table().classify_wire("x", [(18, 5), (3, 13), (60, 2), (1, 3)])  # DescribeCluster with Fetch v3
    assert verdict.library == FP.UNKNOWN and verdict.confidence == FP.LOW
    assert re.search(r"nearest: \S+ \S+.*not trusted: no recorded \S+ run sent", verdict.evidence)


def test_fake_broker_clients_out_of_the_table():
    """The earlier evaluation set (tests/fingerprint_evaluation.py: kafka-python 1.4.4 to 3.0.12, aiokafka 0.7
    to 0.14, confluent-kafka 1.4 to 2.16 and kproto against fake brokers 2.3, 2.8 and 4.0), most of its
    releases and brokers outside the table: never a wrong library at `high`; the figures docs/analyze.md shows."""
    named = scoring.evaluate(evaluation.CLIENTS)
    _no_wrong_library_at_high(named)
    _no_wrong_library_at_high(scoring.evaluate(evaluation.CLIENTS, kip511=False))
    assert named["right_library"] >= 0.8 * named["clients"]


def test_the_documented_figures_are_the_current_ones():
    """docs/analyze.md shows the confusion tables and leave-one-out figures the committed data gives."""
    text = (ROOT / "docs" / "analyze.md").read_text()
    assert scoring.confusion_markdown(scoring.evaluate(scoring.recorded_clients(R.RUNS))) in text
    assert scoring.confusion_markdown(scoring.evaluate(scoring.recorded_clients(R.RUNS), kip511=False)) in text
    assert scoring.confusion_markdown(scoring.evaluate(evaluation.CLIENTS)) in text
    for line in leave_one_out_lines():
        assert line in text, line


def leave_one_out_lines() -> list[str]:
    lines = []
    for by in ("release", "library"):
        for kip511 in (True, False):
            r = scoring.leave_one_out(R.RUNS, by, kip511=kip511)
            lines.append(
                f"| {by} | {'KIP-511 first' if kip511 else 'wire alone'} | {r['clients']} | "
                f"{100 * r['right_library'] / r['clients']:.1f} % | {100 * r['right_range'] / r['clients']:.1f} % | "
                f"{r['unknown']} | {r['wrong_library_high']} |"
            )
    return lines


def test_evaluation_can_fail():
    """A table without kafka-python names the recorded kafka-python clients wrongly: the figure drops."""
    runs = [r for r in FP.table().runs if r.library != "kafka-python"]
    result = scoring.evaluate(scoring.recorded_clients(R.RUNS), FP.Table(runs))
    assert result["right_library"] < scoring.evaluate(scoring.recorded_clients(R.RUNS))["right_library"]


# ---------------------------------------------------------------- the classifier, on a small made-up table
def _run(library, release, pairs, ids=(), software=(), broker="3.9", pin=None, handshakes=(1,), works=True, refused=()):
    return FP.Run(
        library,
        release,
        broker,
        pin,
        frozenset(pairs),
        frozenset([tuple(pairs[:3])]),
        tuple(ids),
        tuple(software),
        frozenset(handshakes),
        works,
        tuple(refused),
        "" if works else "producer: socket disconnected",
    )


SMALL = FP.Table(
    [
        _run("lib-a", "1.0", [(18, 0), (3, 1), (0, 2)], ids=("lib-a-producer-1",)),
        _run(
            "lib-a",
            "1.0",
            [(18, 0), (3, 1), (0, 2)],
            ids=("lib-a-producer-1",),
            broker="4.0",
            works=False,
            refused=[(0, 2)],
        ),
        _run("lib-a", "2.0", [(18, 0), (3, 5), (0, 7)], ids=("lib-a-producer-1",)),
        _run("lib-a", "2.0", [(18, 0), (3, 5), (0, 7)], ids=("lib-a-producer-1",), broker="4.0"),
        _run("lib-a", "2.0", [(18, 0), (3, 1), (0, 2)], pin="0.10"),
        _run("lib-a", "2.0", [(18, 0), (3, 1), (0, 2)], pin="0.10", broker="4.0", works=False, refused=[(0, 2)]),
        _run("lib-a", "2.0", [(18, 0), (3, 4), (0, 6)], broker="2.3", software=[("lib-a-name", "2.0")]),
        _run("lib-b", "0.5", [(18, 3), (3, 9), (0, 8)], ids=("rd",), software=[("lib-b-name", "0.5.0")]),
    ]
)


def test_classify_by_recorded_versions():
    """High only with the library's default client.id, the recorded opening and at least SURE_PAIRS pairs."""
    verdict = SMALL.classify_wire("lib-a-producer-3", [(18, 0), (3, 5), (0, 7)], 1)
    assert (verdict.library, verdict.releases, verdict.confidence) == ("lib-a", ("2.0",), FP.HIGH)
    assert SMALL.classify_wire("my-app", [(18, 0), (3, 5), (0, 7)], 1).confidence == FP.MEDIUM
    assert SMALL.classify_wire("lib-a-producer-3", [(18, 0), (3, 5), (0, 7)], 2).confidence == FP.MEDIUM
    # Only what both releases send: the range covers both; two pairs are never sure.
    both = SMALL.classify_wire("lib-a-producer-1", [(18, 0), (3, 1)], 1)
    assert (both.library, both.range_text, both.confidence) == ("lib-a", "any release (recorded 1.0 .. 2.0)", FP.MEDIUM)
    newer = SMALL.classify_wire("lib-a-producer-3", [(18, 0), (3, 5), (0, 7)], 1)
    assert newer.range_text == "after 1.0 (recorded 2.0)"


@pytest.mark.parametrize(
    "versions, release, inside",
    [
        ("after 1.4.7, before 3.0.12 (recorded 2.0.2)", "2.2.15", True),
        ("after 1.4.7, before 3.0.12 (recorded 2.0.2)", "1.4.7", False),  # both ends exclusive
        ("after 1.4.7, before 3.0.12 (recorded 2.0.2)", "3.0.12", False),
        ("before 2.0.2 (recorded 1.4.7)", "1.4.6", True),
        ("after 2.0.2 (recorded 3.0.12)", "3.1.0", True),
        ("after v1.27.2 (Shopify), before v1.61.1 (recorded v1.43.3)", "v1.38.1 (Shopify)", True),
        ("before v1.43.3 (recorded v1.27.2 (Shopify))", "v1.45.0", False),
        ("any release (recorded 1.7.1 librdkafka-2.0.2)", "1.7.1 librdkafka-2.0.2", True),
        ("2.11.1-rdkafka-2.11.1", "2.11.1", True),
        ("2.6.1", "2.11.1", False),
        ("4.0", "4.1.2", False),
        ("2.0.2", "1.7.1 librdkafka-2.0.2", True),
        (None, "2.4.1", False),
        ("1.4.7 .. 2.0.2", "2.0.1", False),
    ],
)
def test_likely_versions_is_read_back_by_one_rule(versions, release, inside):
    """fingerprint.release_in_versions: what the held-out scorer and scoring.evaluate both judge a range by."""
    assert FP.release_in_versions(versions, release) is inside


def test_every_version_a_run_sent_is_in_its_span():
    """A run that sent Metadata v1 and v8 explains a release between that sends v6 (its requests in the
    recorded client's order: ApiVersions, Metadata, CreateTopics)."""
    table = FP.Table([_run("lib-go", "0.4", [(18, 0), (3, 1), (19, 0), (3, 8)])])
    assert table.classify_wire("app", [(18, 0), (3, 6), (19, 0)], 1).library == "lib-go"


def test_a_library_that_sent_every_pair_goes_first():
    """Two libraries' recorded versions span the pairs; the one whose runs sent each of them is named."""
    table = FP.Table(
        [
            _run("lib-x", "1", [(18, 0), (3, 6), (19, 2)]),
            _run("lib-x", "1", [(18, 0), (3, 4), (19, 0)]),
            _run("lib-y", "1", [(18, 0), (3, 2), (19, 0)]),
            _run("lib-y", "1", [(18, 4), (3, 12), (19, 7)]),
        ]
    )
    verdict = table.classify_wire("app", [(18, 0), (3, 6), (19, 0)], 1)
    assert verdict.library == "lib-x" and "so do lib-y's" in verdict.evidence
    alone = FP.Table([r for r in table.runs if r.library == "lib-y"]).classify_wire(
        "app", [(18, 0), (3, 6), (19, 0)], 1
    )
    assert alone.confidence == FP.LOW and "no recorded lib-y run sent Metadata v6" in alone.evidence


def test_api_versions_behaviour_tells_libraries_apart():
    """A client that never asked ApiVersions is not the Java-like library whose clients always did, though its
    runs sent these very pairs: a library that went without, at a version setting between its recorded ones."""
    table = FP.Table(
        [
            _run("lib-java", "1.0", [(18, 1), (3, 5), (0, 5)]),
            _run("lib-py", "2.0", [(3, 1), (0, 2)], pin="0.10", handshakes=(None,)),
            _run("lib-py", "2.0", [(18, 0), (3, 5), (0, 7)]),
        ]
    )
    verdict = table.classify_wire("app", [(3, 5), (0, 5)], None)
    assert verdict.library == "lib-py" and "lib-java clients always asked ApiVersions first" in verdict.evidence
    assert table.classify_wire("app", [(18, 1), (3, 5), (0, 5)], 1).library == "lib-java"


def test_versions_alone_name_no_library():
    """Versions within what a library sent, in the order nearly every library's clients open with, are what any
    client may send: `unknown`, with the nearest library and why. What is the library's own names it: its default
    client.id, its first two requests (versions and all) that no other library opened with."""
    table = FP.Table(
        [
            _run("lib-a", "1", [(18, 0), (3, 1), (0, 2)], ids=("lib-a-1",)),
            _run("lib-a", "2", [(18, 0), (3, 9), (0, 9)]),
            _run("lib-b", "1", [(18, 3), (3, 5), (0, 5)]),
            _run("lib-c", "1", [(18, 2), (3, 4), (0, 3)]),
        ]
    )
    verdict = table.classify_wire("my-app", [(18, 0), (3, 5), (0, 5)], 1)
    assert (verdict.library, verdict.confidence) == (FP.UNKNOWN, FP.LOW)
    assert "nearest: lib-a" in verdict.evidence and "nothing it sent is lib-a's own" in verdict.evidence
    assert "clients of 3 of the 3 libraries" in verdict.evidence
    assert table.classify_wire("lib-a-7", [(18, 0), (3, 5), (0, 5)], 1).library == "lib-a"
    assert table.classify_wire("my-app", [(18, 0), (3, 9), (0, 5)], 1).library == "lib-a"
    # Asked ApiVersions as no recorded client did (twice on a connection): nothing is compared, nothing is its own.
    assert table.classify_wire("my-app", [(18, 0), (3, 9), (0, 5)], 2).library == FP.UNKNOWN


def test_a_client_written_on_a_codec_is_unknown_software():
    """ApiVersions v0, Metadata v7, Produce v7 (kproto-codec's producer in the held-out recording): each within
    what kafka-python 3.0.12 sent, in the order clients of all nine libraries open with: nothing kafka-python's
    own, so `unknown` with kafka-python as the nearest; with kafka-python's default client.id it is kafka-python."""
    table = FP.table()
    verdict = table.classify_wire("orders-producer", [(18, 0), (3, 7), (0, 7)], 1)
    assert (verdict.library, verdict.confidence) == (FP.UNKNOWN, FP.LOW)
    assert (
        "nearest: kafka-python" in verdict.evidence
        and "not trusted: nothing it sent is kafka-python's own" in verdict.evidence
    )
    assert table.classify_wire("kafka-python-producer-1", [(18, 0), (3, 7), (0, 7)], 1).library == "kafka-python"


def test_the_library_whose_order_it_is_goes_before_one_that_only_sent_the_versions():
    """sarama v1.27.2 pinned to 0.10.2.0 sends in its group the pairs kafka-python and aiokafka pinned to 0.10.1
    send too, but in an order only sarama's clients sent (Heartbeat before OffsetFetch): sarama, a `low` guess
    that names kafka-python as well."""
    run = next(r for r in R.RUNS if r[:4] == ("sarama", "v1.27.2 (Shopify)", "0.10.2.0", "4.0.2"))
    _id, order, _software, handshakes = next(c for c in run[-1] if c[0].endswith("-group"))
    verdict = FP.table().classify_wire("billing", order, handshakes)
    assert (verdict.library, verdict.confidence, verdict.alternatives) == ("sarama", FP.LOW, ("kafka-python",))
    assert "is sarama's own" in verdict.evidence


def test_a_share_consumer_is_the_java_client():
    """A share consumer (KIP-932) is named by the wire alone: the Java client, the only recorded library whose
    clients used ShareGroupHeartbeat, ShareFetch and ShareAcknowledge, at the release that sent their versions."""
    run = next(r for r in R.RUNS if r[1].endswith(" (share consumer)"))
    _id, order, _software, handshakes = next(c for c in run[-1] if c[0].endswith("-group"))
    verdict = FP.table().classify_wire("billing-reader", order, handshakes)
    assert (verdict.library, verdict.confidence) == ("kafka-clients", FP.MEDIUM)
    assert "only kafka-clients clients used ShareGroupHeartbeat, ShareFetch, ShareAcknowledge" in verdict.evidence
    assert FP.release_in_versions(verdict.range_text, "4.4.0")


def test_a_null_client_id_is_no_recorded_library():
    verdict = SMALL.classify_wire(None, [(18, 0), (3, 5), (0, 7)], 1)
    assert (verdict.library, verdict.confidence) == (FP.UNKNOWN, FP.LOW)
    assert "nearest: lib-a 2.0" in verdict.evidence and "null client.id" in verdict.evidence


def test_between_recorded_releases_or_brokers():
    """Versions no run sent together, each within a release's recorded versions: not above medium."""
    verdict = SMALL.classify_wire("x", [(18, 0), (3, 5), (0, 6)])
    assert (verdict.library, verdict.releases, verdict.confidence) == ("lib-a", ("2.0",), FP.MEDIUM)


def test_api_versions_per_connection_tells_a_shared_protocol_layer_apart():
    """Same pairs in the same order (one library built on the other's protocol classes): how many
    ApiVersions requests a client sends on one connection decides. Without the count nothing it sent is
    either library's own (both, every library of this table, sent it so): unknown, naming both."""
    pairs = [(3, 0), (18, 0), (3, 1), (0, 3)]
    twins = FP.Table([_run("lib-old", "1.4", pairs, handshakes=(2,)), _run("lib-async", "0.7", pairs, handshakes=(1,))])
    asks_twice = twins.classify_wire("my-producer", pairs, 2)
    assert (asks_twice.library, asks_twice.confidence) == ("lib-old", FP.MEDIUM)
    assert twins.classify("my-producer", pairs, None, None, 1).library == "lib-async"
    unsure = twins.classify_wire("my-producer", pairs)
    assert (unsure.library, unsure.confidence) == (FP.UNKNOWN, FP.LOW)
    assert "those of lib-async and lib-old clients" in unsure.evidence
    # A count no run had does not rule anything out.
    assert twins.classify_wire("my-producer", pairs, 5).confidence == FP.LOW


def test_default_client_id_breaks_ties_and_unknown_traffic_is_unknown():
    assert SMALL.id_libraries("lib-a-producer-7") == {"lib-a"}
    assert SMALL.classify_wire("rd", [(18, 3), (3, 9)]).library == "lib-b"
    nothing = SMALL.classify_wire("x", [(18, 3), (3, 1), (0, 7)])
    assert (nothing.library, nothing.confidence) == (FP.UNKNOWN, FP.LOW)
    assert "nearest: lib-" in nothing.evidence
    assert SMALL.classify_wire("x", [(60, 1)]).library == FP.UNKNOWN  # an API no recorded client used
    assert SMALL.classify_wire("x", []).library is None
    # The default client.id of another library: never sure.
    assert SMALL.classify_wire("rd", [(18, 0), (3, 5), (0, 7)]).confidence == FP.LOW


def test_kip511_name_wins_and_only_the_wire_contradicts_it():
    named = SMALL.classify("x", [(18, 3), (3, 9), (0, 8)], "lib-b-name", "0.5.0")
    assert (named.library, named.range_text, named.confidence, named.mismatch) == ("lib-b", "0.5.0", FP.KIP511, None)
    # lib-b 0.5.0 never sent Metadata 9+... it sent 9: older versions rule nothing out (an older broker).
    assert SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-b-name", "0.5.0").mismatch is None
    # Newer versions than the release (or the first recorded one above it) sent: ruled out.
    liar = SMALL.classify("x", [(18, 3), (3, 12), (0, 8)], "lib-b-name", "0.4")
    assert liar.library == "lib-b" and "rules it out" in liar.mismatch and "Metadata v12" in liar.mismatch
    older = SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-a-name", "0.1")
    assert older.library == "lib-a" and "Metadata v5" in older.mismatch and "Produce v7" in older.mismatch
    # Between recorded releases, or newer than any recorded: no contradiction.
    assert SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-a-name", "1.5").mismatch is None
    assert SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-a-name", "3.5").mismatch is None
    # A name the table does not know is taken as sent: nothing to check it against.
    unknown = SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "my-app", "9")
    assert (unknown.library, unknown.mismatch) == ("my-app", None)


def test_advice_tells_a_pin_from_an_old_release():
    """From what the recorded 4.x runs did: an old release is upgraded to the first that works, a pin
    gets its library's own setting; a guess is worded as one; unknown software gets no library's setting."""
    advice = SMALL.advice(SMALL.classify_wire("lib-a-producer-1", [(18, 0), (3, 1), (0, 2)]), ["Produce v2"])
    assert (
        "a guess" not in advice["cause"]
        and "closes the connection without an answer on Produce v2" in advice["symptom"]
    )
    old = SMALL.advice(FP.Verdict("lib-a", ("1.0",), FP.HIGH, runs=SMALL.runs[:2]), ["Produce v2"])
    assert "sends Produce v2 by itself" in old["cause"] and old["fix"].startswith("upgrade lib-a to 2.0 or later")
    sarama = FP.Table([_run("sarama", "1.0", [(18, 0), (3, 1), (0, 2)], pin="0.10.2.0")])
    pinned = sarama.advice(FP.Verdict("sarama", ("1.0",), FP.HIGH, pinned=True), ["Produce v2"])
    assert "(Config.Version)" in pinned["cause"] and "Config.Version to sarama.V2_1_0_0" in pinned["fix"]
    assert "predicted" in pinned["symptom"]  # no recorded run failed: said, not invented
    guess = SMALL.advice(
        FP.Verdict("lib-a", ("1.0",), FP.LOW, evidence="2 pairs", alternatives=("lib-b",)), ["Produce v2"]
    )
    assert guess["cause"].startswith("a guess (low confidence: 2 pairs): if this is lib-a or lib-b")
    assert "if it is lib-a:" in guess["fix"] and "if it is lib-b:" in guess["fix"]
    unknown = SMALL.advice(FP.Verdict(FP.UNKNOWN, (), FP.LOW, evidence="nearest: lib-a 1.0"), ["Produce v2"])
    assert "unknown" in unknown["cause"] and "nearest: lib-a 1.0" in unknown["cause"]
    assert SMALL.first_working("lib-a", pinned=False) == "2.0" and SMALL.first_working("lib-a", pinned=True) is None


def test_order_of_use_and_labels():
    assert FP.order_of_use({(3, 1): 20, (18, 0): 10, (0, 2): None, (1, 4): 20}) == [(0, 2), (18, 0), (1, 4), (3, 1)]
    assert FP.api_pairs(["Metadata v12", "UNKNOWN(999) v0"]) == [(3, 12), (999, 0)]
    assert FP.release_key("2.0.10") > FP.release_key("2.0.2") and FP.release_key("main") == ()
    assert FP.release_key("v1.43.3") == (1, 43, 3) and FP.release_key("1.7.1 librdkafka-2.0.2") == (1, 7, 1)


# ---------------------------------------------------------------- in the clients table
def test_every_sample_client_is_named():
    """On samples/sample.pcap every client gets a likely software, by KIP-511 or by fingerprint."""
    from kproto.analyze.spark import combine as C
    from kproto.analyze.spark import planning as P
    from kproto.analyze.spark import task as T
    from kproto.analyze.spark import worker as W

    path = str(ROOT / "samples" / "sample.pcap")
    parts = pa.Table.from_batches(
        [b for s in P.plan_file(path, 0) for b in T.process_split(s, broker_ports=(9092, 9093))], schema=W.PARTS_SCHEMA
    )
    clients = C.combine(parts)["clients"].to_pylist()
    assert len(clients) >= 8
    for c in clients:
        assert c["likely_software"] and c["fingerprint_confidence"], c
        assert c["api_order"] and set(c["api_order"]) == set(c["apis"])
        asked = any(api.startswith("ApiVersions ") for api in c["apis"])
        assert (c["api_versions_per_connection"] or 0) >= asked and (c["api_versions_per_connection"] is None) != asked
    by_id = {c["client_id"]: c for c in clients}
    # kafka-python 3.0.12 pinned to api_version 0.10.1 sends what franz-go capped at 0.10.1 does: a low guess
    # that names the other.
    auditor = by_id["legacy-auditor"]
    assert auditor["fingerprint_confidence"] == FP.LOW
    assert {
        auditor["likely_software"],
        re.search(r"; (\S+) sent them too", auditor["fingerprint_evidence"]).group(1),
    } == {"kafka-python", "franz-go"}
    assert by_id["inventory-sync"]["likely_software"] == "aiokafka"
    assert re.fullmatch(
        r"(after [\w.]+(, before [\w.]+)?|before [\w.]+|any release) \(recorded [\w.]+( \.\. [\w.]+)?\)",
        by_id["legacy-auditor"]["likely_versions"],
    )
    # Two programs sent their KIP-511 names under one client.id: the row says both, never a mix.
    both = by_id["kproto-sample"]
    assert both["likely_software"] == "kproto sample + kproto-sample"
    assert (both["client_software_name"], both["client_software_version"]) in {
        ("kproto sample", "1.0 beta"),
        ("kproto-sample", "1.0.0"),
    }


def test_api_versions_per_connection_is_the_most_on_one_connection():
    """A connection's ApiVersions requests add up over its usage rows (versions, ranges of a split
    capture); the column is the most on any one connection, null for a client that sent none."""
    from kproto.analyze.spark import combine as C
    from kproto.analyze.spark import worker as W

    rows = [  # (connection, client_id, api_key, api_version, requests)
        (1, "old", 18, 3, 1),
        (1, "old", 18, 0, 1),
        (1, "old", 18, 0, 1),
        (1, "old", 3, 1, 4),
        (2, "old", 18, 0, 2),
        (3, "new", 18, 3, 1),
        (4, "mid", 3, 12, 6),
    ]
    columns = dict(zip(("connection_id", "client_id", "api_key", "api_version", "requests"), zip(*rows)))
    zeros = [0] * len(rows)
    parts = pa.Table.from_batches(
        [
            W.as_parts(
                "usage",
                dict(
                    {name: list(values) for name, values in columns.items()},
                    capture=["x.pcap"] * len(rows),
                    deprecated_requests=zeros,
                    removed_in_4x_requests=zeros,
                    error_responses=zeros,
                    first_ns=list(range(len(rows))),
                    last_ns=list(range(len(rows))),
                ),
                len(rows),
            )
        ],
        schema=W.PARTS_SCHEMA,
    )
    clients = {c["client_id"]: c["api_versions_per_connection"] for c in C.combine(parts)["clients"].to_pylist()}
    assert clients == {"old": 3, "new": 1, "mid": None}


def test_programs_sharing_a_client_id_keep_their_own_name_and_version():
    """kcat (librdkafka 2.0.2) and confluent-kafka 2.11.1 both `rdkafka` on one host: the row's name and
    version are one pair a request sent (the greatest, as Spark's max of the struct), never
    "librdkafka 2.11.1-rdkafka-2.11.1"; the fingerprint names both."""
    from kproto.analyze.spark import combine as C
    from kproto.analyze.spark import worker as W

    rows = [
        (1, 18, 3, "librdkafka", "2.0.2"),
        (1, 3, 12, None, None),
        (2, 18, 3, "confluent-kafka-python", "2.11.1-rdkafka-2.11.1"),
        (2, 0, 9, None, None),
    ]
    columns = dict(
        zip(("connection_id", "api_key", "api_version", "client_software_name", "client_software_version"), zip(*rows))
    )
    zeros = [0] * len(rows)
    parts = pa.Table.from_batches(
        [
            W.as_parts(
                "usage",
                dict(
                    {name: list(values) for name, values in columns.items()},
                    capture=["x.pcap"] * len(rows),
                    client_id=["rdkafka"] * len(rows),
                    requests=[1] * len(rows),
                    deprecated_requests=zeros,
                    removed_in_4x_requests=zeros,
                    error_responses=zeros,
                    first_ns=list(range(len(rows))),
                    last_ns=list(range(len(rows))),
                ),
                len(rows),
            )
        ],
        schema=W.PARTS_SCHEMA,
    )
    (row,) = C.combine(parts)["clients"].to_pylist()
    assert (row["client_software_name"], row["client_software_version"]) == ("librdkafka", "2.0.2")
    assert row["likely_software"] == "confluent-kafka + kcat"
    assert row["likely_versions"] == "confluent-kafka 2.11.1-rdkafka-2.11.1 + kcat 2.0.2"


def _recorder():
    import importlib
    import sys

    sys.path.insert(0, str(ROOT / "tools"))
    return importlib.import_module("record_fingerprints")


def test_old_releases_get_the_newest_pyenv_python_of_their_line(tmp_path, monkeypatch):
    """A release this Python cannot run is made with the Python it needs, or said to be missing it."""
    import sys

    recorder = _recorder()
    monkeypatch.setattr(recorder, "PYENV_VERSIONS", tmp_path)
    assert recorder.interpreter("kafka-python", "3.0.12") == (Path(sys.executable), None)
    python, problem = recorder.interpreter("confluent-kafka", "1.4.2")
    assert python is None and "needs Python 3.7" in problem and str(tmp_path) in problem
    for version in ("3.7.9", "3.7.16", "3.8.18"):
        (tmp_path / version / "bin").mkdir(parents=True)
        (tmp_path / version / "bin" / "python").touch()
    assert recorder.interpreter("confluent-kafka", "1.4.2") == (tmp_path / "3.7.16" / "bin" / "python", None)


def test_the_driver_runs_on_the_oldest_python_it_is_given():
    """tools/fingerprint_driver.py runs under the old Pythons of OLD_PYTHONS: no syntax newer than 3.6."""
    import ast

    oldest = min(tuple(map(int, v.split("."))) for v in _recorder().OLD_PYTHONS.values())
    source = (ROOT / "tools" / "fingerprint_driver.py").read_text()
    ast.parse(source, feature_version=oldest)
    assert "from __future__ import annotations" not in source or oldest >= (3, 7)
    # Annotations are evaluated at import before 3.9: no list[...] / X | Y in them.
    assert not re.search(r"(->|:)\s*(list|dict|tuple|set)\[", source)


if __name__ == "__main__":
    # The figures docs/analyze.md shows ("Client fingerprints"): .venv/bin/python -m tests.analyze.test_fingerprint
    recorded = scoring.recorded_clients(R.RUNS)
    for title, result in (
        ("The recorded clients, KIP-511 first:", scoring.evaluate(recorded)),
        ("By the fingerprint alone:", scoring.evaluate(recorded, kip511=False)),
        ("The fake-broker set, KIP-511 first:", scoring.evaluate(evaluation.CLIENTS)),
    ):
        print(f"{title}\n\n{scoring.confusion_markdown(result)}")
    print("\n".join(leave_one_out_lines()))
