"""How the client fingerprint does on clients of known truth: the figures docs/analyze.md shows.

:func:`evaluate` classifies clients whose library and release are known and counts what it got
right (the library, the version range by :func:`~kproto.analyze.fingerprint_runs.release_in_versions`);
:func:`leave_one_out` does it for each release or library with a table built without it;
:func:`confusion_markdown` writes the result. tests/analyze/test_fingerprint.py and tools/record_clients.py
use them; the analysis itself classifies with kproto.analyze.fingerprint.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kproto.analyze.fingerprint import Table, table
from kproto.analyze.fingerprint_runs import HIGH, UNKNOWN, release_in_versions, runs_of


def evaluate(clients: Iterable[tuple], fingerprints: Table | None = None, *, kip511: bool = True) -> dict:
    """How the verdicts do on clients of known truth.

    ``clients``: (library, release, broker, client_id, pairs in order, software, most ApiVersions
    requests on one connection) rows; a library may be given by its KIP-511 name.
    ``kip511``: the verdict the clients table shows (a KIP-511 name wins), or, False, the
    wire's fingerprint alone. A version range is right when :func:`release_in_versions` puts the
    true release within the verdict's ``likely_versions`` text.
    """
    fingerprints = fingerprints or table()
    confusion: dict[str, dict[str, int]] = {}
    wrong = []
    right_library = right_range = total = sure_and_wrong = 0
    for library, release, broker, client_id, order, software, handshakes in clients:
        truth = fingerprints.library_of(library)
        pairs = [tuple(p) for p in order]
        if kip511 and software:
            verdict = fingerprints.classify(client_id, pairs, software[0], software[1], handshakes)
        else:
            verdict = fingerprints.classify_wire(client_id, pairs, handshakes)
        predicted = verdict.library or "none"
        row = confusion.setdefault(truth, {})
        row[predicted] = row.get(predicted, 0) + 1
        total += 1
        in_range = predicted == truth and release_in_versions(verdict.range_text, release)
        right_library += predicted == truth
        right_range += in_range
        sure_and_wrong += verdict.confidence == HIGH and predicted != truth
        if not in_range:
            wrong.append((truth, release, broker, client_id, predicted, verdict.range_text, verdict.confidence))
    return {
        "clients": total,
        "right_library": right_library,
        "right_range": right_range,
        "wrong_library_high": sure_and_wrong,
        "confusion": confusion,
        "wrong": wrong,
    }


def recorded_clients(runs: Iterable[tuple]) -> list[tuple]:
    """Every client of :data:`kproto.analyze.client_recordings.RUNS` as an :func:`evaluate` row."""
    return [
        (library, release, broker if pin is None else f"{broker} pin {pin}", *client)
        for library, release, pin, broker, *_rest, clients in runs
        for client in clients
    ]


def leave_one_out(recorded: Sequence[tuple], by: str = "release", *, kip511: bool = False) -> dict:
    """Each release (``by="release"``) or library (``"library"``) classified by a table built
    without it: how the table does on releases, and software, it has never seen."""
    groups: dict[tuple, list[tuple]] = {}
    for run in recorded:
        groups.setdefault(run[:2] if by == "release" else run[:1], []).append(run)
    result = {"clients": 0, "right_library": 0, "right_range": 0, "wrong_library_high": 0, "unknown": 0, "wrong": []}
    for key, held_out in groups.items():
        rest = [run for run in recorded if (run[:2] if by == "release" else run[:1]) != key]
        scored = evaluate(recorded_clients(held_out), Table(runs_of(rest)), kip511=kip511)
        for name in ("clients", "right_library", "right_range", "wrong_library_high"):
            result[name] += scored[name]
        result["unknown"] += sum(row.get(UNKNOWN, 0) for row in scored["confusion"].values())
        result["wrong"] += scored["wrong"]
    return result


def confusion_markdown(result: dict) -> str:
    """The confusion table (true library per row, named library per column) and the figures, as Markdown."""
    named = sorted({p for row in result["confusion"].values() for p in row})
    lines = ["| true \\ named | " + " | ".join(named) + " |", "|---" * (len(named) + 1) + "|"]
    for library in sorted(result["confusion"]):
        lines.append(f"| {library} | " + " | ".join(str(result["confusion"][library].get(p, 0)) for p in named) + " |")
    total = result["clients"]
    lines.append("")
    lines.append(
        f"Right library: {result['right_library']} of {total}; right version range: "
        f"{result['right_range']} of {total} ({100 * result['right_range'] / max(total, 1):.1f} %)."
    )
    return "\n".join(lines) + "\n"
