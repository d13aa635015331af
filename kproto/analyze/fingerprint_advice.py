"""What to do about a client that sends versions Kafka 4.x removed: its library's setting or release.

The advice the report and the next steps give (:func:`advice`): the library's own version setting
(:data:`SETTINGS`) or its first release that works on 4.x, and what real 4.x brokers did with
it in the recorded runs (the fingerprint table's :meth:`~kproto.analyze.fingerprint.Table.works_on_4x`
and its neighbours); a guess says it is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from kproto.analyze.fingerprint_runs import LOW, MEDIUM, Run, Verdict, pair_label, release_key

# Each library's own version setting (the pins of tools/record_clients.py, PINS) and how to set it
# for Kafka 4.x (KIP-896: 4.x serves what Kafka 2.1 clients send and newer).
SETTINGS = {
    "kafka-python": (
        "api_version",
        "remove the api_version setting (kafka-python then asks the broker), or set it to (2, 1, 0) or later",
    ),
    "aiokafka": ("api_version", 'remove the api_version setting, or set it to "2.1.0" or later'),
    "confluent-kafka": (
        "api.version.request / broker.version.fallback",
        "set api.version.request=true (the default) and remove broker.version.fallback (or set it to 2.1.0 or later)",
    ),
    "kcat": (
        "api.version.request / broker.version.fallback (-X)",
        "run it with -X api.version.request=true and without -X broker.version.fallback (or set it to 2.1.0 or later)",
    ),
    "sarama": ("Config.Version", "set Config.Version to sarama.V2_1_0_0 or later (the broker's release)"),
    "franz-go": (
        "kgo.MaxVersions / kgo.MinVersions",
        "remove the kgo.MaxVersions cap (or raise it to kversion.V2_1_0() or later) and any kgo.MinVersions below that",
    ),
}


class RecordedOn4x(Protocol):
    """What the advice reads of the fingerprint table (kproto.analyze.fingerprint.Table)."""

    releases: dict[str, tuple[str, ...]]

    def works_on_4x(self, library: str, release: str, pinned: bool) -> bool | None: ...
    def first_working(self, library: str, pinned: bool) -> str | None: ...
    def failures_4x(self, library: str, pinned: bool) -> Sequence[Run]: ...


def advice(fingerprints: RecordedOn4x, verdict: Verdict, removed: Iterable[str]) -> dict[str, str]:
    """Cause, symptom and fix for a client that sent versions Kafka 4.x removed: the library's own
    setting or first working release, and what real 4.x brokers did with it; a guess says so."""
    removed = list(removed)
    removed_text = ", ".join(removed)
    library = verdict.library
    predicted = (
        f"predicted from kproto's tables (KIP-896): a 4.x broker closes the connection without an "
        f"answer on {removed_text}"
    )
    if not verdict.named or library not in fingerprints.releases:
        who = f"{library} is not in the fingerprint table" if verdict.named else "the software is unknown"
        near = f" ({verdict.evidence})" if verdict.evidence else ""
        return {
            "cause": f"sends {removed_text}, which Kafka 4.x removed; {who}{near}",
            "symptom": predicted,
            "fix": "upgrade the client to a release that negotiates with ApiVersions, and remove any version "
            "setting that pins it below Kafka 2.1",
        }
    advice = _library_advice(fingerprints, verdict, library, removed, predicted)
    if verdict.confidence == LOW:
        guesses = [(library, advice)] + [
            (
                other,
                _library_advice(
                    fingerprints, Verdict(other, (), LOW, pinned=verdict.pinned), other, removed, predicted
                ),
            )
            for other in verdict.alternatives
        ]
        names = " or ".join(lib for lib, _a in guesses)
        advice = {
            "cause": f"a guess (low confidence: {verdict.evidence}): if this is {names}: "
            + "; ".join(f"{a['cause']}" for _lib, a in guesses),
            "symptom": advice["symptom"],
            "fix": "; ".join(f"if it is {lib}: {a['fix']}" for lib, a in guesses),
        }
    elif verdict.confidence == MEDIUM:
        advice["cause"] = f"likely (medium confidence): {advice['cause']}"
    return advice


def _library_advice(
    fingerprints: RecordedOn4x, verdict: Verdict, library: str, removed: list[str], predicted: str
) -> dict[str, str]:
    """Cause, symptom and fix were the client ``library`` (at the verdict's releases and pin)."""
    removed_text = ", ".join(removed)
    named = f"{library} {verdict.range_text}" if verdict.range_text else library
    setting = SETTINGS.get(library)
    failing = fingerprints.failures_4x(library, verdict.pinned)
    seen = [r for r in failing if not verdict.runs or any(r.release == v.release for v in verdict.runs)] or failing
    if seen:
        refused = [pair_label(p) for p in sorted({p for r in seen for p in r.refused})]
        brokers = ", ".join(sorted({r.broker for r in seen}, key=release_key))
        symptom = (
            f"recorded against {brokers}: the broker closes the connection without an answer on "
            f"{', '.join([v for v in refused if v in removed] or refused)}; the client: {seen[0].failure}"
        )
    else:
        symptom = predicted + f" (no recorded {library} run failed on 4.x)"
    first = fingerprints.first_working(library, pinned=False)
    upgrade = f"upgrade {library} to {first} or later" if first else f"no recorded {library} release works: replace it"
    if library == "kafka-clients":
        upgrade = f"upgrade the kafka-clients release (to {first} or later)" if first else upgrade
    if verdict.pinned and setting:
        cause = (
            f"{library}'s version setting ({setting[0]}) pins it to an old Kafka release: pinned, "
            f"{named} sends {removed_text}, which Kafka 4.x removed"
        )
        fix = setting[1]
        releases = {r.release for r in verdict.runs} or set(fingerprints.releases[library])
        if any(fingerprints.works_on_4x(library, release, pinned=False) is False for release in releases):
            fix += f"; and {upgrade} (before it, {library} fails on 4.x without the setting too)"
        ignores = fingerprints.first_working(library, pinned=True)
        if ignores:
            fix += f"; or upgrade {library} to {ignores} or later, which works on 4.x with the setting too"
    else:
        cause = f"{named} sends {removed_text} by itself, which Kafka 4.x removed"
        fix = upgrade + (f"; or {setting[1]}" if setting else "")
    return {"cause": cause, "symptom": symptom, "fix": fix}
