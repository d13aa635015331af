"""kproto.fingerprint: the recorded table, the classifier, its figures on the separate evaluation recording."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa

from kproto import fingerprint as FP
from kproto import fingerprint_data as data
from tests import fingerprint_evaluation as evaluation

ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------- the committed facts
def test_the_table_spans_each_family():
    """Every library family the issue names is recorded over a range of releases (and kproto itself)."""
    recorded = FP.table().releases
    assert len(recorded["kafka-python"]) >= 8 and recorded["kafka-python"][-1].startswith("3.")
    assert recorded["kafka-python"][0].startswith("1.4")
    assert recorded["aiokafka"][0].startswith("0.7") and recorded["aiokafka"][-1] == "0.14.0"
    assert len(recorded["confluent-kafka"]) >= 10 and recorded["confluent-kafka"][0].startswith("1.")
    from kproto._version import __version__

    assert recorded["kproto"] == (__version__,)
    assert len(set(data.BROKERS)) >= 2
    # What could not be installed is said, not dropped.
    for library, releases in recorded.items():
        for release in releases:
            assert f"{library} {release}" not in data.NOT_RECORDED


def test_evaluation_recorded_apart_from_the_table():
    """The evaluation clients have their own client ids, and cover every recorded release."""
    table_ids = {i for run in FP.table().runs for i in run.default_ids}
    evaluated = {(lib, rel) for lib, rel, *_ in evaluation.CLIENTS}
    assert evaluated == {(lib, rel) for lib, rels in FP.table().releases.items() for rel in rels}
    own_ids = [c[3] for c in evaluation.CLIENTS if c[3] not in table_ids]
    assert own_ids and all(i.startswith("eval") for i in own_ids)


def _never_sure_when_wrong(result: dict) -> None:
    for library, release, broker, client_id, named, versions, confidence in result["wrong"]:
        assert confidence == FP.LOW, (library, release, broker, client_id, named, versions, confidence)


def test_evaluation_figures():
    """As the clients table names them (the issue's figure): the right library for every evaluation client
    (kafka-python 1.4.4 clients, whose pairs and order match aiokafka 0.7's, by their ApiVersions requests
    per connection), the right versions for at least 90 %; a wrong verdict is never more than low confidence."""
    result = FP.evaluate(evaluation.CLIENTS)
    assert result["clients"] >= 300
    assert result["right_library"] == result["clients"], result["wrong"]
    assert result["right_range"] >= 0.9 * result["clients"], result["wrong"]
    _never_sure_when_wrong(result)


def test_evaluation_figures_of_the_wire_alone():
    """KIP-511 names ignored: the fingerprint alone still names at least 95 % right, library and range."""
    result = FP.evaluate(evaluation.CLIENTS, kip511=False)
    assert result["right_library"] >= 0.95 * result["clients"], result["wrong"]
    assert result["right_range"] >= 0.9 * result["clients"], result["wrong"]
    _never_sure_when_wrong(result)


def test_the_documented_confusion_tables_are_the_current_ones():
    """docs/analyze.md shows the confusion tables the committed data gives (the test fails when they go stale)."""
    text = (ROOT / "docs" / "analyze.md").read_text()
    assert FP.confusion_markdown(FP.evaluate(evaluation.CLIENTS)) in text
    assert FP.confusion_markdown(FP.evaluate(evaluation.CLIENTS, kip511=False)) in text


def test_evaluation_can_fail():
    """A table without kafka-python names the evaluation's kafka-python clients wrongly: the figure drops."""
    runs = [r for r in FP.table().runs if r.library != "kafka-python"]
    releases = {k: v for k, v in FP.table().releases.items() if k != "kafka-python"}
    result = FP.evaluate(evaluation.CLIENTS, FP.Table(runs, releases))
    assert result["right_library"] < result["clients"]


# ---------------------------------------------------------------- the classifier, on a small made-up table
def _run(library, release, pairs, ids=(), software=(), broker="3.9", pinned=False, handshakes=(1,)):
    return FP.Run(library, release, broker, pinned, frozenset(pairs), frozenset([tuple(pairs[:3])]),
                  tuple(ids), tuple(software), frozenset(handshakes))


SMALL = FP.Table([
    _run("lib-a", "1.0", [(18, 0), (3, 1), (0, 2)], ids=("lib-a-producer-1",)),
    _run("lib-a", "2.0", [(18, 0), (3, 5), (0, 7)], ids=("lib-a-producer-1",)),
    _run("lib-a", "2.0", [(18, 0), (3, 1), (0, 2)], pinned=True),
    _run("lib-a", "2.0", [(18, 0), (3, 4), (0, 6)], broker="2.3", software=[("lib-a-name", "2.0")]),
    _run("lib-b", "0.5", [(18, 3), (3, 9), (0, 8)], ids=("rd",), software=[("lib-b-name", "0.5.0")]),
], {"lib-a": ("1.0", "2.0"), "lib-b": ("0.5",)})


def test_classify_by_recorded_versions():
    verdict = SMALL.classify_wire("anything", [(18, 0), (3, 5), (0, 7)])
    assert (verdict.library, verdict.releases, verdict.confidence) == ("lib-a", ("2.0",), FP.HIGH)
    # Only what both releases send: the range covers both.
    both = SMALL.classify_wire("x", [(18, 0), (3, 1)])
    assert (both.library, both.range_text) == ("lib-a", "1.0 .. 2.0")


def test_between_recorded_brokers_the_newest_versions_decide():
    """Versions no run sent together, each within a release's span: interpolated, medium confidence."""
    verdict = SMALL.classify_wire("x", [(18, 0), (3, 5), (0, 6)])
    assert (verdict.library, verdict.releases, verdict.confidence) == ("lib-a", ("2.0",), FP.MEDIUM)


def test_api_versions_per_connection_tells_a_shared_protocol_layer_apart():
    """Same pairs in the same order (one library built on the other's protocol classes): how many
    ApiVersions requests a client sends on one connection decides; unknown, the verdict stays low."""
    pairs = [(3, 0), (18, 0), (3, 1), (0, 3)]
    twins = FP.Table([_run("lib-old", "1.4", pairs, handshakes=(2,)), _run("lib-async", "0.7", pairs, handshakes=(1,))],
                     {"lib-old": ("1.4",), "lib-async": ("0.7",)})
    asks_twice = twins.classify_wire("my-producer", pairs, 2)
    assert (asks_twice.library, asks_twice.confidence) == ("lib-old", FP.HIGH)
    assert twins.classify("my-producer", pairs, None, None, 1).library == "lib-async"
    assert twins.classify_wire("my-producer", pairs).confidence == FP.LOW
    # A count no run had does not rule anything out.
    assert twins.classify_wire("my-producer", pairs, 5).confidence == FP.LOW


def test_default_client_id_breaks_ties_and_unknown_traffic_is_low():
    assert SMALL.id_hint("lib-a-producer-7") == ("lib-a", set())
    assert SMALL.classify_wire("rd", [(18, 3), (3, 9)]).library == "lib-b"
    nothing = SMALL.classify_wire("x", [(60, 1)])
    assert nothing.confidence == FP.LOW
    assert SMALL.classify_wire("x", []).library is None


def test_kip511_name_wins_and_a_contradiction_is_reported():
    named = SMALL.classify("x", [(18, 3), (3, 9), (0, 8)], "lib-b-name", "0.5.0")
    assert (named.library, named.range_text, named.confidence, named.mismatch) == ("lib-b", "0.5.0", FP.KIP511, None)
    liar = SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-b-name", "0.5.0")
    assert liar.library == "lib-b" and "the wire looks like lib-a 2.0" in liar.mismatch
    too_new = SMALL.classify("x", [(18, 0), (3, 1), (0, 2)], "lib-b-name", "0.5.0")
    assert "the wire looks like lib-a 1.0 .. 2.0" in too_new.mismatch
    # The right library, a version the wire rules out; a version newer than any recorded is no contradiction.
    older = SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-a-name", "0.1")
    assert older.library == "lib-a" and "lib-a 2.0" in older.mismatch
    assert SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "lib-a-name", "3.5").mismatch is None
    # A name the table does not know is taken as sent: nothing to check it against.
    unknown = SMALL.classify("x", [(18, 0), (3, 5), (0, 7)], "my-app", "9")
    assert (unknown.library, unknown.mismatch) == ("my-app", None)


def test_advice_tells_a_pin_from_an_old_release():
    old = SMALL.classify_wire("x", [(18, 0), (3, 1), (0, 2)])
    cause, fix = SMALL.advice(FP.Verdict("lib-a", ("1.0",), FP.HIGH), ["Produce v2"])
    assert cause.startswith("removed versions") and fix == "upgrade lib-a to 2.0 or later"
    cause, fix = SMALL.advice(FP.Verdict("lib-a", ("2.0",), FP.HIGH), ["Produce v2"])
    assert "api_version pin" in cause and "remove the api_version" in fix
    assert SMALL.first_ready("lib-a") == "2.0" and old.range_text == "1.0 .. 2.0"
    cause, _fix = SMALL.advice(FP.Verdict("other", (), FP.LOW), ["Produce v2"])
    assert "not in the fingerprint table" in cause


def test_order_of_use_and_labels():
    assert FP.order_of_use({(3, 1): 20, (18, 0): 10, (0, 2): None, (1, 4): 20}) == [(0, 2), (18, 0), (1, 4), (3, 1)]
    assert FP.api_pairs(["Metadata v12", "UNKNOWN(999) v0"]) == [(3, 12), (999, 0)]
    assert FP.release_key("2.0.10") > FP.release_key("2.0.2") and FP.release_key("main") == ()


# ---------------------------------------------------------------- in the clients table
def test_every_sample_client_is_named():
    """On samples/sample.pcap every client gets a likely software, by KIP-511 or by fingerprint."""
    from kproto.spark import combine as C
    from kproto.spark import planning as P
    from kproto.spark import task as T
    from kproto.spark import worker as W

    path = str(ROOT / "samples" / "sample.pcap")
    parts = pa.Table.from_batches([b for s in P.plan_file(path, 0) for b in T.process_split(s, broker_ports=(9092, 9093))],
                                  schema=W.PARTS_SCHEMA)
    clients = C.combine(parts)["clients"].to_pylist()
    assert len(clients) >= 8
    for c in clients:
        assert c["likely_software"] and c["fingerprint_confidence"], c
        assert c["api_order"] and set(c["api_order"]) == set(c["apis"])
        asked = any(api.startswith("ApiVersions ") for api in c["apis"])
        assert (c["api_versions_per_connection"] or 0) >= asked and (c["api_versions_per_connection"] is None) != asked
    by_id = {c["client_id"]: c for c in clients}
    assert by_id["legacy-auditor"]["likely_software"] == "kafka-python"
    assert by_id["inventory-sync"]["likely_software"] == "aiokafka"
    assert re.fullmatch(r"[\w.]+( \.\. [\w.]+)?", by_id["legacy-auditor"]["likely_versions"])


def test_api_versions_per_connection_is_the_most_on_one_connection():
    """A connection's ApiVersions requests add up over its usage rows (versions, ranges of a split
    capture); the column is the most on any one connection, null for a client that sent none."""
    from kproto.spark import combine as C
    from kproto.spark import worker as W

    rows = [  # (connection, client_id, api_key, api_version, requests)
        (1, "old", 18, 3, 1), (1, "old", 18, 0, 1), (1, "old", 18, 0, 1), (1, "old", 3, 1, 4),
        (2, "old", 18, 0, 2), (3, "new", 18, 3, 1), (4, "mid", 3, 12, 6)]
    columns = dict(zip(("connection_id", "client_id", "api_key", "api_version", "requests"), zip(*rows)))
    zeros = [0] * len(rows)
    parts = pa.Table.from_batches([W.as_parts("usage", dict(
        {name: list(values) for name, values in columns.items()}, capture=["x.pcap"] * len(rows),
        deprecated_requests=zeros, removed_in_4x_requests=zeros, error_responses=zeros,
        first_ns=list(range(len(rows))), last_ns=list(range(len(rows)))), len(rows))], schema=W.PARTS_SCHEMA)
    clients = {c["client_id"]: c["api_versions_per_connection"] for c in C.combine(parts)["clients"].to_pylist()}
    assert clients == {"old": 3, "new": 1, "mid": None}


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
