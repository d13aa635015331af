"""The report's "Next steps" against the KIP-896 truth table of real clients on real brokers (issue 37).

Every recorded run of kproto/analyze/client_recordings.py (each client release, as it comes and pinned,
against 3.9.2, 4.0.2 and 4.4.0) becomes the ``clients`` rows the pipeline makes of its capture
(client.id, KIP-511 name and version, pairs in order of first use, ApiVersions per connection,
requests of versions Kafka 4.x removed), and "Next steps" is asked about them: a client release
that breaks on a real 4.x broker is flagged - under its own library, with what the broker
really did and the first release or the library's own setting that works - and one that works
is not flagged at all.
"""

from __future__ import annotations

from kproto import versions as kv
from kproto.analyze import client_recordings as R
from kproto.analyze import fingerprint as FP
from kproto.analyze.spark import next_steps


def clients_rows(run: tuple) -> tuple[list[dict], list[dict]]:
    """The run's ``clients`` rows and the per-client rows of removed versions, as the pipeline makes them."""
    clients, removed = [], []
    for client_id, order, software, handshakes in run[-1]:
        gone = [pair for pair in order if kv.version_info(*pair).removed_in_4x]
        clients.append(
            {
                "client_ip": "127.0.0.1",
                "client_id": client_id,
                "requests": len(order),
                "client_software_name": software[0] if software else None,
                "client_software_version": software[1] if software else None,
                "client_software": ["/".join(software)] if software else [],
                "api_order": [FP.pair_label(tuple(p)) for p in order],
                "api_versions_per_connection": handshakes,
                "removed_in_4x_requests": len(gone),
            }
        )
        removed += [
            {
                "client_ip": "127.0.0.1",
                "client_id": client_id,
                "api_name": FP.pair_label(p).split(" v")[0],
                "api_version": p[1],
            }
            for p in gone
        ]
    return clients, removed


def breaks_on_4x(run: tuple) -> list[tuple]:
    """The recorded 4.x runs of the run's release and pin that failed (the truth table's "fails")."""
    return [r for r in R.RUNS if r[:3] == run[:3] and FP.release_key(r[3])[:1] >= (4,) and not r[4]]


# Each pinned library's own setting, as its documentation names it (what the fix must name).
SETTING_NAMES = {
    "kafka-python": "api_version",
    "aiokafka": "api_version",
    "confluent-kafka": "api.version.request",
    "kcat": "api.version.request",
    "sarama": "Config.Version",
    "franz-go": "kgo.MaxVersions",
}


def first_working(library: str) -> str:
    """From the truth table alone: the oldest release of the library from which every recorded one,
    as it comes, works on the 4.x brokers."""
    releases = sorted({run[1] for run in R.RUNS if run[0] == library}, key=FP.release_key)
    first = None
    for release in releases:
        works = all(run[4] for run in R.RUNS if run[:3] == (library, release, None) and run[3].startswith("4"))
        first = (first or release) if works else None
    return first


def judge(run: tuple) -> list[str]:
    """What "Next steps" gets wrong about one recorded run (nothing: it agrees with the truth table)."""
    library, release, pin, broker = run[:4]
    table = FP.table()
    steps = next_steps.client_steps(*clients_rows(run))
    failed = breaks_on_4x(run)
    label = f"{library} {release} pin={pin} on {broker}"
    if not failed:
        return [f"{label}: works on 4.x but flagged: {s['client_id']}" for s in steps]
    if not steps:
        return [f"{label}: breaks on 4.x, not flagged"]
    problems = []
    refused = {FP.pair_label(p) for r in failed for p in r[7]}
    if not any(v in s["symptom"] for s in steps for v in refused):
        problems.append(f"{label}: no symptom names what 4.x closed the connection on ({refused})")
    for s in steps:
        # The library, or among the libraries a low-confidence guess names (they send the same).
        if library not in [table.library_of(name) for name in (s["software"] or "").split(" or ")]:
            problems.append(f"{label}: {s['client_id']} named {s['software']} ({s['confidence']})")
        if "closes the connection without an answer" not in s["symptom"]:
            problems.append(f"{label}: {s['client_id']} symptom {s['symptom']!r} is not what 4.x did")
        if pin is not None and not breaks_on_4x(run[:2] + (None,)):
            wanted = SETTING_NAMES[library]  # the setting: the release works without the pin
        else:
            wanted = f"{first_working(library)} or later"
        if wanted not in s["fix"]:
            problems.append(f"{label}: {s['client_id']} fix {s['fix']!r} lacks {wanted!r}")
    return problems


def test_next_steps_agree_with_the_real_broker_truth_table():
    """100 % agreement: every recorded run that breaks on a real 4.x broker is flagged with the real
    symptom and the release or setting that works; no run that works has a client flagged."""
    wrong = {run[:4]: judge(run) for run in R.RUNS}
    disagreeing = {key: found for key, found in wrong.items() if found}
    breaking = sum(bool(breaks_on_4x(run)) for run in R.RUNS)
    assert breaking >= 30 and len(R.RUNS) - breaking >= 90  # both kinds are there to judge
    assert not disagreeing, [p for found in disagreeing.values() for p in found]


def test_every_pinned_library_has_its_own_setting():
    """The libraries the recorder pins are the libraries whose setting the advice names, and back."""
    assert set(FP.SETTINGS) == set(R.PINS) == set(SETTING_NAMES)
    for library, (setting, fix) in FP.SETTINGS.items():
        assert SETTING_NAMES[library] in setting and SETTING_NAMES[library] in fix


def test_the_judge_can_fail():
    """A working run made to look broken, and advice that names the wrong setting, are caught."""
    working = next(run for run in R.RUNS if run[:3] == ("kafka-python", "3.0.12", None) and run[3] == "4.4.0")
    pinned = next(run for run in R.RUNS if run[:3] == ("kafka-python", "3.0.12", "0.10.1") and run[3] == "3.9.2")
    assert judge(working) == [] and judge(pinned) == []
    flagged_working = pinned[:2] + (None,) + pinned[3:]
    assert judge(flagged_working) and "flagged" in judge(flagged_working)[0]
    settings = dict(FP.SETTINGS)
    try:
        FP.SETTINGS["kafka-python"] = ("api_version", "upgrade your Kafka")
        assert judge(pinned)
    finally:
        FP.SETTINGS.clear()
        FP.SETTINGS.update(settings)
