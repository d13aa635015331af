"""The vocabulary of the client fingerprint: the recorded runs it is built from and the verdict it gives.

A :class:`Run` is one library release (as it comes, or pinned) recorded against one real broker
by tools/record_clients.py (:func:`runs_of` reads them from
:data:`kproto.analyze.client_recordings.RUNS`); a :class:`Verdict` is what the fingerprint
(kproto.analyze.fingerprint) says about one client. Here too: the release numbers and version
texts both read (:func:`release_key`, :func:`release_in_versions`), the (API, version) pairs and
their spans (each API's lowest and highest version: :func:`span_of`, :func:`union_spans`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from kproto._common.api_keys import ApiKey

Pair = tuple[int, int]

HIGH, MEDIUM, LOW, KIP511 = "high", "medium", "low", "KIP-511"
UNKNOWN = "unknown"
SURE_PAIRS = 3  # fewer distinct (API, version) pairs than this are never `high`
OPENING = 3  # the first requests of a client compared with the recorded ones
API_VERSIONS = int(ApiKey.API_VERSIONS)
DRIVER_ID_PREFIX = "kp-"  # tools/record_clients.py names the clients it configures so: other ids are defaults


ANY_RELEASE = "any release"
RECORDED = "recorded "


def release_in_versions(versions: str | None, release: str) -> bool:
    """Whether ``release`` lies within what a ``likely_versions`` text says: the one rule for the held-out
    scorer (tools/record_clients.py) and :func:`evaluate`. A fingerprint range (:meth:`Table.versions_text`):
    strictly after its "after" release and before its "before" one; a KIP-511 version: the release itself,
    to the precision the version gives ("4.0" is not 4.1.2). Every release number in ``release`` counts
    (kcat's "1.7.1 librdkafka-2.0.2" is 1.7.1 and its librdkafka 2.0.2)."""
    if not versions:
        return False
    truths = [tuple(int(p) for p in found.split(".")) for found in re.findall(r"\d+(?:\.\d+)*", release)]
    head, marker, _recorded = versions.partition(f" ({RECORDED}")
    if not marker:  # a KIP-511 version
        wanted = release_key(versions)
        return bool(wanted) and any(t[: len(wanted)] == wanted for t in truths)
    after = before = None
    for bound in head.split(", "):
        if bound.startswith("after "):
            after = release_key(bound[len("after ") :])
        elif bound.startswith("before "):
            before = release_key(bound[len("before ") :])
        elif bound != ANY_RELEASE:
            return False
    return any((after is None or t > after) and (before is None or t < before) for t in truths)


def api_pairs(labels: Iterable[str]) -> list[Pair]:
    """(API key, version) of each "Name vN" label of the ``apis`` / ``api_order`` columns."""
    from kproto import versions as kv

    pairs = []
    for label in labels:
        name, _, version = label.rpartition(" v")
        key = int(name[8:-1]) if name.startswith("UNKNOWN(") else kv.api_key_of(name)
        pairs.append((key, int(version)))
    return pairs


def pair_label(pair: Pair) -> str:
    from kproto import versions as kv

    return f"{kv.api_name(pair[0])} v{pair[1]}"


def release_key(release: str) -> tuple[int, ...]:
    """A release string as numbers for ordering ("2.0.10" after "2.0.2", "v1.43.3" as 1.43.3);
    text without digits sorts first."""
    match = re.search(r"\d+(?:\.\d+)*", release)
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


def _is_4x(broker: str) -> bool:
    return release_key(broker)[:1] >= (4,)


@dataclass(frozen=True)
class Run:
    """One recorded run: one library release (as it comes, or pinned) against one real broker."""

    library: str
    release: str
    broker: str
    pin: str | None
    pairs: frozenset[Pair]  # every (API, version) any of its clients used
    openings: frozenset[tuple[Pair, ...]]  # the first requests of each of its clients, in order
    default_ids: tuple[str, ...]  # the client.ids the library chose when given none
    software: tuple[tuple[str, str], ...]  # KIP-511 (name, version) it announced
    handshakes: frozenset[int | None] = frozenset()  # its clients' most ApiVersions requests on one connection
    works: bool = True  # every step of the scripted run succeeded
    refused: tuple[Pair, ...] = ()  # requests the broker closed the connection on without an answer
    failure: str = ""  # the first failing step and what the client said
    # each of its clients' requests in order, whole, with its most ApiVersions requests on one connection
    clients: frozenset[tuple[tuple[Pair, ...], int | None]] = frozenset()

    @property
    def pinned(self) -> bool:
        return self.pin is not None

    @property
    def asks(self) -> frozenset[bool]:
        """Whether its clients asked ApiVersions (True), went without (False), or both."""
        return frozenset(h is not None for h in self.handshakes)


@dataclass(frozen=True)
class Verdict:
    """What the fingerprint says about one client."""

    library: str | None
    releases: tuple[str, ...]  # the recorded releases it may be (or lies between), oldest first
    confidence: str | None  # high / medium / low, or KIP-511 when the client named itself
    versions: str | None = None  # the version text shown (a range, or the KIP-511 version)
    mismatch: str | None = None  # the wire rules the KIP-511 name out: how
    pinned: bool = False  # only runs with the library's version setting sent these pairs
    evidence: str | None = None  # why: what fits, what else fits, the nearest match of unknown software
    runs: tuple[Run, ...] = ()  # the recorded runs the verdict rests on
    alternatives: tuple[str, ...] = ()  # other libraries the same evidence fits as well (a low verdict)

    @property
    def range_text(self) -> str | None:
        """What ``likely_versions`` shows: the KIP-511 version, or the releases the verdict stands for
        (:meth:`Table.versions_text`); :func:`release_in_versions` reads it back."""
        if self.versions is not None:
            return self.versions
        if not self.releases:
            return None
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first} .. {last}"

    @property
    def named(self) -> bool:
        """A library is named (not unknown, not nothing)."""
        return self.library not in (None, UNKNOWN)


def span_of(pairs: Iterable[Pair]) -> dict[int, tuple[int, int]]:
    """The lowest and highest version of each API among ``pairs`` (a run may send one API at two versions)."""
    return union_spans(*({api: (v, v)} for api, v in pairs))


def union_spans(*spans: dict[int, tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """Each API's lowest and highest version over all ``spans``."""
    out: dict[int, tuple[int, int]] = {}
    for span in spans:
        for api, (lo, hi) in span.items():
            was = out.get(api, (lo, hi))
            out[api] = (min(was[0], lo), max(was[1], hi))
    return out


def runs_of(recorded: Iterable[tuple]) -> list[Run]:
    """The table's runs from the rows of :data:`kproto.analyze.client_recordings.RUNS`."""
    runs = []
    for library, release, pin, broker, works, steps, _log, refused, _cut, _errors, clients in recorded:
        failing = [(step, outcome[len("FAILED ") :]) for step, outcome in steps.items() if outcome != "ok"]
        runs.append(
            Run(
                library,
                release,
                broker,
                pin,
                frozenset(tuple(p) for _id, order, _sw, _h in clients for p in order),
                frozenset(tuple(tuple(p) for p in order[:OPENING]) for _id, order, _sw, _h in clients if order),
                tuple(
                    sorted(
                        {cid for cid, *_ in clients if not (cid or "").startswith(DRIVER_ID_PREFIX)},
                        key=lambda cid: (cid is not None, cid or ""),
                    )
                ),
                tuple(sorted({tuple(sw) for _id, _o, sw, _h in clients if sw})),
                frozenset(h for *_rest, h in clients),
                works,
                tuple(tuple(p) for p in refused),
                f"{failing[0][0]}: {failing[0][1][:120]}" if failing else "",
                frozenset((tuple(tuple(p) for p in order), h) for _id, order, _sw, h in clients if order),
            )
        )
    return runs
