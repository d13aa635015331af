"""Which client library (and which releases of it) a client is, from what it sends.

The table is built, when first used, from :mod:`kproto.analyze.client_recordings`: real releases
of nine libraries (Apache Kafka's Java client, confluent-kafka, kcat, kafka-python,
aiokafka, franz-go, sarama, segmentio kafka-go, kafkajs) that tools/record_clients.py
drove through one scripted run against real Apache Kafka brokers, as they come and with
their library's version setting ("pin"). Nothing is generated or edited by hand: record
again (docs/analyze.md, "Client fingerprints") and the table follows.

A client is described by what the ``clients`` table holds: its client.id, the (API,
version) pairs in the order it first used them, how many ApiVersions requests it sent on
one connection, and the KIP-511 software name and version when it sent them. What tells
libraries and releases apart: the versions each release asks for (and whether the library was
ever seen sending each of them), the requests it opens with, whether and how often it asks
ApiVersions on one connection, and the default client.id (``producer-1``,
``kafka-python-producer-1``, ``aiokafka-producer-2``, ``rdkafka``, ``kgo``, ``sarama``,
``kafkajs``; an empty one for kafka-go 0.4).

A verdict is ``high`` only when one library alone has recorded runs that sent every pair,
opened as the client did and asked ApiVersions as often, and the client sent at least
``SURE_PAIRS`` pairs; fewer pairs, or evidence another library shares, lowers it. Only what is a
library's own names it (:func:`kproto.analyze.fingerprint_evidence.own`): versions within what a library sent, in the order
nearly every client opens with, are what any software may send. Traffic no recorded run explains,
or that carries nothing of the library its versions point at, is ``unknown``, with the nearest
recorded release (or verdict) and why it is not trusted.

The parts: the recorded runs, their version spans and the verdict (kproto.analyze.fingerprint_runs),
what is a library's own evidence (kproto.analyze.fingerprint_evidence), the advice for a client
Kafka 4.x refuses (kproto.analyze.fingerprint_advice), the figures on clients of known truth
(kproto.analyze.fingerprint_scoring); here the table, the version-range classifier, and the names
the rest of kproto imports.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import replace
from functools import lru_cache

from kproto.analyze import fingerprint_advice, fingerprint_evidence
from kproto.analyze.fingerprint_advice import SETTINGS
from kproto.analyze.fingerprint_evidence import common_start, id_pattern
from kproto.analyze.fingerprint_runs import (
    ANY_RELEASE,
    API_VERSIONS,
    DRIVER_ID_PREFIX,
    HIGH,
    KIP511,
    LOW,
    MEDIUM,
    OPENING,
    RECORDED,
    SURE_PAIRS,
    UNKNOWN,
    Pair,
    Run,
    Verdict,
    _is_4x,
    api_pairs,
    pair_label,
    release_in_versions,
    release_key,
    runs_of,
    span_of,
    union_spans,
)

__all__ = [
    "ANY_RELEASE",
    "API_VERSIONS",
    "DRIVER_ID_PREFIX",
    "FINGERPRINT_COLUMNS",
    "HIGH",
    "KIP511",
    "LOW",
    "MEDIUM",
    "OPENING",
    "RECORDED",
    "SETTINGS",
    "SURE_PAIRS",
    "UNKNOWN",
    "Pair",
    "Run",
    "Table",
    "Verdict",
    "api_pairs",
    "classify_row",
    "order_of_use",
    "pair_label",
    "release_in_versions",
    "release_key",
    "runs_of",
    "table",
]


class Table:
    """The recorded runs, indexed for classifying."""

    def __init__(self, runs: Sequence[Run], releases: dict[str, tuple[str, ...]] | None = None) -> None:
        self.runs = tuple(runs)
        libraries = sorted({r.library for r in self.runs})
        # One release's programs (the Java client 4.4.0 and its share consumer) sort together, the plain one first.
        self.releases = releases or {
            lib: tuple(sorted({r.release for r in self.runs if r.library == lib}, key=lambda r: (release_key(r), r)))
            for lib in libraries
        }
        self.span: dict[tuple[str, str], dict[int, tuple[int, int]]] = {}
        self.names: dict[str, str] = {}
        self.id_patterns: list[tuple[re.Pattern, str]] = []
        self.sent: dict[str, set[Pair]] = {}  # every pair each library's runs sent
        self.asking: dict[str, set[bool]] = {}  # whether a library's clients asked ApiVersions, went without, or both
        for run in self.runs:
            self.span[(run.library, run.release)] = union_spans(
                self.span.get((run.library, run.release), {}), span_of(run.pairs)
            )
            self.sent.setdefault(run.library, set()).update(run.pairs)
            self.asking.setdefault(run.library, set()).update(run.asks)
            for name, _version in run.software:
                self.names[name] = run.library
            for client_id in (cid for cid in run.default_ids if cid is not None):
                entry = (id_pattern(client_id), run.library)
                if (entry[0].pattern, run.library) not in {(p.pattern, lib) for p, lib in self.id_patterns}:
                    self.id_patterns.append(entry)
        self.null_id = any(None in r.default_ids for r in self.runs)  # a recorded library sent a null client.id
        self.apis = {
            lib: {api for (l2, _r), span in self.span.items() if l2 == lib for api in span} for lib in libraries
        }
        self.known_apis = set().union(*self.apis.values()) if self.apis else set()
        # every recorded client's requests in order and ApiVersions requests per connection (a made-up run: its openings)
        self.clients = {
            (r.library, order, h)
            for r in self.runs
            for order, h in (r.clients or {(o, h) for o in r.openings for h in r.handshakes})
        }

    def ordered(self, library: str, releases: Iterable[str]) -> tuple[str, ...]:
        wanted = set(releases)
        return tuple(r for r in self.releases.get(library, ()) if r in wanted)

    def library_of(self, name: str) -> str:
        """The table's library for a KIP-511 name (``apache-kafka-java`` is kafka-clients), or the name."""
        return self.names.get(name, name)

    def id_libraries(self, client_id: str | None) -> set[str]:
        """The libraries whose default client.id this is."""
        if client_id is None:
            return set()
        return {library for pattern, library in self.id_patterns if pattern.fullmatch(client_id)}

    # ------------------------------------------------------------ the wire
    def classify_wire(self, client_id: str | None, order: Sequence[Pair], handshakes: int | None = None) -> Verdict:
        """The verdict from the client.id, the pairs and the ApiVersions requests per connection (no KIP-511 name),
        its versions shown as the releases it stands for (:meth:`versions_text`)."""
        verdict = self._wire(client_id, order, handshakes)
        if verdict.named and verdict.releases and verdict.library in self.releases:
            return replace(verdict, versions=self.versions_text(verdict.library, verdict.releases))
        return verdict

    def _wire(self, client_id: str | None, order: Sequence[Pair], handshakes: int | None) -> Verdict:
        order = [tuple(p) for p in order]
        if not order:
            return Verdict(None, (), None)
        # An API no recorded client used tells nothing (the scripted runs do not call every API).
        compared = [p for p in order if p[0] in self.known_apis]
        if not compared:
            return Verdict(UNKNOWN, (), LOW, evidence="no recorded client used any of its APIs")
        if client_id is None and not self.null_id:
            # Every recorded library sets a client.id of its own when given none (kafka-go an empty one).
            return self._unknown(
                compared,
                set(),
                "it sent a null client.id, which no recorded library sends (each sets a default when given none)",
            )
        hinted = self.id_libraries(client_id)
        verdict = self._guess(compared, hinted, handshakes)
        if not verdict.named:
            return verdict
        # Only what is a library's own names it: a verdict resting on versions alone is unknown software, but for
        # a library whose own evidence the client carries and whose recorded versions explain it as well.
        own, sent = self._own(compared, hinted, handshakes)
        if verdict.library in own:
            return verdict
        for library in own:
            other = self._only(library, compared, hinted, handshakes)
            if other is not None:
                return replace(
                    other,
                    confidence=LOW,
                    alternatives=(verdict.library,),
                    evidence=f"{other.evidence}; what it sent is {library}'s own ({sent}), the versions "
                    f"{verdict.library}'s too",
                )
        return self._unknown(
            compared,
            hinted,
            f"nothing it sent is {verdict.library}'s own, only versions other software may send too: {sent}",
            nearest=verdict,
        )

    def _guess(self, compared: list[Pair], hinted: set[str], handshakes: int | None) -> Verdict:
        """The library (and releases) the pairs, the opening requests, the ApiVersions requests per connection
        and the client.id fit best; :meth:`_not_specific` then asks whether anything in it is that library's own."""
        observed = set(compared)
        fitting = [r for r in self.runs if observed <= r.pairs]
        asked = handshakes is not None
        if fitting and not any(asked in self.asking[r.library] for r in fitting):
            # Every library whose runs sent these pairs behaved otherwise with ApiVersions: its clients always
            # asked it first (the Java client, librdkafka), or never did. A library that behaved as this client
            # did, at a release or version setting between recorded ones, explains it better, if one does.
            behaved = self._between(compared, hinted, asked=asked)
            if behaved is not None:
                libraries = ", ".join(sorted({r.library for r in fitting}))
                return replace(
                    behaved,
                    evidence=behaved.evidence + f"; recorded {libraries} runs sent these pairs "
                    f"together, but {libraries} clients {'always asked' if not asked else 'never asked'} "
                    "ApiVersions first",
                )
        if fitting:
            verdict = self._recorded(fitting, compared, hinted, handshakes)
            if hinted and verdict.library not in hinted:
                # Its client.id is another library's default: that library, if its recorded versions (or a
                # release older than its oldest recorded) explain the pairs, as a guess naming the other.
                own = self._between(compared, hinted, only=hinted, older=True)
                if own is not None:
                    return Verdict(
                        own.library,
                        own.releases,
                        LOW,
                        evidence=own.evidence + f"; its client.id is "
                        f"{own.library}'s default, but recorded {verdict.library} runs sent these pairs",
                        runs=own.runs,
                        alternatives=(verdict.library,),
                    )
            return verdict
        return (
            self._between(compared, hinted, asked=asked)
            or self._between(compared, hinted)
            or self._unknown(compared, hinted)
        )

    def _recorded(self, fitting: list[Run], compared: list[Pair], hinted: set[str], handshakes: int | None) -> Verdict:
        """Recorded runs sent every pair: the connection evidence (ApiVersions per connection, the opening
        requests, the default client.id) narrows them; confidence says how many libraries share what is left."""
        sharing = {r.library for r in fitting}
        same_handshakes = [r for r in fitting if handshakes in r.handshakes]
        narrowed = same_handshakes or fitting
        start = {id(r): max((common_start(compared, o) for o in r.openings), default=0) for r in narrowed}
        best = max(start.values())
        narrowed = [r for r in narrowed if start[id(r)] == best]
        left = {r.library for r in narrowed}
        if len(left) > 1 and hinted & left:
            narrowed = [r for r in narrowed if r.library in hinted]
            left = {r.library for r in narrowed}
        library = max(sorted(left), key=lambda lib: sum(r.library == lib for r in narrowed))
        runs = tuple(r for r in narrowed if r.library == library)
        releases = self.ordered(library, {r.release for r in runs})
        n = len(set(compared))
        opened_alike = best >= min(len(compared), OPENING)
        others = sorted(sharing - {library})
        # Libraries that negotiate ask for the same newest versions: what only one library does (its
        # default client.id, its opening requests, its ApiVersions requests per connection) makes it sure.
        if len(left) > 1 or (hinted and library not in hinted):
            confidence = LOW
        elif others or not opened_alike or not same_handshakes or library not in hinted:
            confidence = MEDIUM if n >= SURE_PAIRS else LOW
        else:
            confidence = HIGH if n >= SURE_PAIRS else MEDIUM
        pinned = all(r.pinned for r in runs)
        text = f"{n} pair(s) that recorded {library} runs sent" + (" (only with its version setting)" if pinned else "")
        if others:
            text += f"; {', '.join(others)} sent them too" + (
                ""
                if len(left) > 1
                else ", told apart by the opening requests, ApiVersions per connection or the default client.id"
            )
        if not opened_alike:
            text += "; it did not open as any recorded client did"
        if hinted and library not in hinted:
            text += f"; its client.id is {', '.join(sorted(hinted))}'s default"
        alone = sorted(
            {api for api, _v in compared if all(api not in apis for lib, apis in self.apis.items() if lib != library)}
        )
        if alone:  # a share consumer's ShareGroupHeartbeat, ShareFetch, ShareAcknowledge
            from kproto import versions as kv

            text += f"; only {library} clients used {', '.join(kv.api_name(api) for api in alone)}"
        return Verdict(
            library,
            releases,
            confidence,
            pinned=pinned,
            evidence=text,
            runs=runs,
            alternatives=tuple(sorted(left - {library})),
        )

    def _between(
        self,
        compared: list[Pair],
        hinted: set[str],
        only: set[str] | None = None,
        older: bool = False,
        asked: bool | None = None,
    ) -> Verdict | None:
        """No run sent these pairs together, but each lies within what one release, or two neighbouring
        recorded releases, sent (with any broker and pin): a release between them, or a broker or pin
        between the recorded ones. ``older``: or a release older than the oldest recorded one (no
        version above what that one sent). ``asked``: only libraries some of whose clients behaved so
        with ApiVersions (asked it, or went without; a pin changes it within one release). Of the
        libraries that fit, one that has sent every pair (in some recorded run) goes before one that
        never sent some, then the opening requests."""
        observed = set(compared)
        fits: dict[str, set[str]] = {}
        libraries = {
            lib: rels
            for lib, rels in self.releases.items()
            if (only is None or lib in only) and (asked is None or asked in self.asking[lib])
        }
        for neighbours in (1, 2):  # one release first; two neighbouring ones only when no single one fits
            for library, releases in libraries.items():
                for i in range(len(releases) - neighbours + 1):
                    chosen = releases[i : i + neighbours]
                    span = union_spans(*(self.span[(library, r)] for r in chosen))
                    if all(api in span and span[api][0] <= v <= span[api][1] for api, v in observed):
                        fits.setdefault(library, set()).update(chosen)
            if fits:
                break
        if not fits and older:
            for library, releases in libraries.items():
                span = self.span[(library, releases[0])]
                if all(api in span and v <= span[api][1] for api, v in observed):
                    fits[library] = {releases[0]}
        if not fits:
            return None
        left = set(fits) & hinted or set(fits)
        unsent = {lib: sorted(observed - self.sent[lib]) for lib in left}
        fewest = min(len(pairs) for pairs in unsent.values())
        left = {lib for lib in left if len(unsent[lib]) == fewest}
        api_start = {
            lib: max(
                (
                    common_start(compared, o, key=lambda p: p[0])
                    for r in self.runs
                    if r.library == lib
                    for o in r.openings
                ),
                default=0,
            )
            for lib in left
        }
        best = max(api_start.values())
        left = {lib for lib in left if api_start[lib] == best}
        library = min(left, key=lambda lib: (len(fits[lib]), lib))
        releases = self.ordered(library, fits[library])
        n = len(observed)
        sure = len(fits) == 1 and n >= SURE_PAIRS and best >= min(len(compared), OPENING) and not unsent[library]
        others = sorted(set(fits) - {library})
        text = (
            f"no recorded run sent these {n} pair(s) together; each lies within what {library} "
            f"{releases[0]} .. {releases[-1]} sent (a release between, or a broker or version setting not recorded)"
        )
        if unsent[library]:
            text += f"; no recorded {library} run sent " + ", ".join(pair_label(p) for p in unsent[library])
        if others:
            text += f"; so do {', '.join(others)}'s"
        runs = tuple(r for r in self.runs if r.library == library and r.release in releases)
        return Verdict(
            library,
            releases,
            MEDIUM if sure else LOW,
            evidence=text,
            runs=runs,
            alternatives=tuple(sorted(left - {library})),
        )

    def _own(self, compared: list[Pair], hinted: set[str], handshakes: int | None) -> tuple[list[str], str]:
        """The libraries something the client sent is the own of, and why (kproto.analyze.fingerprint_evidence.own)."""
        return fingerprint_evidence.own(self.clients, len(self.releases), compared, hinted, handshakes)

    def _only(self, library: str, compared: list[Pair], hinted: set[str], handshakes: int | None) -> Verdict | None:
        """The verdict were ``library`` the only library in the table (None: its recorded versions do not explain
        the pairs)."""
        observed = set(compared)
        fitting = [r for r in self.runs if r.library == library and observed <= r.pairs]
        if fitting:
            return self._recorded(fitting, compared, hinted, handshakes)
        return self._between(compared, hinted, only={library}) or self._between(
            compared, hinted, only={library}, older=True
        )

    def _unknown(
        self, compared: list[Pair], hinted: set[str], why: str | None = None, nearest: Verdict | None = None
    ) -> Verdict:
        """Software the table does not know: named ``unknown``, with the nearest recorded release (or the
        verdict ``nearest`` that was not trusted) and why it is not trusted (``why``, or the pairs no run of it sent)."""
        if nearest is not None:
            versions = self.versions_text(nearest.library, nearest.releases) if nearest.releases else ""
            return Verdict(
                UNKNOWN,
                (),
                LOW,
                evidence=f"not in the table; nearest: {nearest.library} {versions} "
                f"({nearest.evidence}), not trusted: {why}",
            )
        observed = set(compared)
        nearest_run = max(
            self.runs,
            key=lambda r: (
                len(observed & r.pairs),
                r.library in hinted,
                max((common_start(compared, o) for o in r.openings), default=0),
                -self.runs.index(r),
            ),
        )
        missing = sorted(observed - nearest_run.pairs)
        shown = ", ".join(pair_label(p) for p in missing[:4]) + (", ..." if len(missing) > 4 else "")
        text = (
            f"not in the table; nearest: {nearest_run.library} {nearest_run.release} ({len(observed) - len(missing)} of "
            f"{len(observed)} pairs), not trusted: " + (why or f"no recorded {nearest_run.library} run sent {shown}")
        )
        return Verdict(UNKNOWN, (), LOW, evidence=text)

    def versions_text(self, library: str, releases: Sequence[str]) -> str:
        """The releases a verdict on ``releases`` (recorded ones, oldest first) stands for, as ``likely_versions``
        shows them: unrecorded releases between recorded ones are taken to send alike, so the range runs from
        after the recorded release before the first of them to before the one after the last (both ends
        exclusive; an end with no recorded release beyond it is open): "after 1.4.7, before 3.0.12 (recorded
        2.0.2)", "before 2.0.2 (recorded 1.4.7)", "after 2.0.2 (recorded 3.0.12)", "any release (recorded 1.7.1)".
        :func:`release_in_versions` reads the text back."""
        ranked = self.releases.get(library, ())
        older = [r for r in ranked if release_key(r) < release_key(releases[0])]  # not a program of the same release
        newer = [r for r in ranked if release_key(r) > release_key(releases[-1])]
        bounds = ([f"after {older[-1]}"] if older else []) + ([f"before {newer[0]}"] if newer else [])
        recorded = releases[0] if releases[0] == releases[-1] else f"{releases[0]} .. {releases[-1]}"
        return f"{', '.join(bounds) or ANY_RELEASE} ({RECORDED}{recorded})"

    # ------------------------------------------------------------ KIP-511
    def ruled_out(self, library: str, version: str | None, order: Sequence[Pair]) -> list[Pair]:
        """The pairs no release of ``library`` at ``version`` can send: versions newer than the recorded
        release at or above it ever sent. Older versions rule nothing out (an older broker, a pin), nor
        APIs its recorded runs never called; a version above every recorded one is open-ended."""
        wanted = release_key(version or "")
        releases = self.releases.get(library, ())
        above = [r for r in releases if release_key(r) >= wanted] if wanted else []
        if not above:
            return []
        span = union_spans(*(self.span[(library, r)] for r in releases if release_key(r) <= release_key(above[0])))
        return sorted({(api, v) for api, v in order if api in span and v > span[api][1]})

    def classify(
        self,
        client_id: str | None,
        order: Sequence[Pair],
        software_name: str | None = None,
        software_version: str | None = None,
        handshakes: int | None = None,
    ) -> Verdict:
        """The verdict: a KIP-511 name wins; it is contradicted only when the wire rules it out."""
        wire = self.classify_wire(client_id, order, handshakes)
        if not software_name:
            return wire
        library = self.library_of(software_name)
        if library not in self.releases:
            return Verdict(
                library, (), KIP511, software_version, evidence="KIP-511 name the table does not know: taken as sent"
            )
        impossible = self.ruled_out(library, software_version, order)
        mismatch = None
        if impossible:
            mismatch = (
                f"KIP-511 says {software_name} {software_version}; the wire rules it out: no {library} "
                f"release up to the first recorded one at or above it sends "
                + ", ".join(pair_label(p) for p in impossible)
            )
            if wire.named and wire.library != library:
                mismatch += f"; the wire looks like {wire.library} {wire.range_text} ({wire.confidence})"
        same = wire.library == library
        return Verdict(
            library,
            self._releases_near(library, software_version),
            KIP511,
            software_version,
            mismatch,
            pinned=same and wire.pinned,
            evidence="KIP-511 name",
            runs=wire.runs if same else (),
        )

    def _releases_near(self, library: str, version: str | None) -> tuple[str, ...]:
        """The recorded release a KIP-511 version names, or the newest recorded one before it."""
        wanted = release_key(version or "")
        if not wanted:
            return ()
        before = [r for r in self.releases.get(library, ()) if release_key(r) and release_key(r) <= wanted]
        return (before[-1],) if before else ()

    # ------------------------------------------------------------ what real 4.x brokers did
    def works_on_4x(self, library: str, release: str, pinned: bool) -> bool | None:
        """Whether the recorded release (pinned or not) worked against every recorded 4.x broker (None: not recorded)."""
        runs = [
            r for r in self.runs if (r.library, r.release, r.pinned) == (library, release, pinned) and _is_4x(r.broker)
        ]
        return all(r.works for r in runs) if runs else None

    def first_working(self, library: str, pinned: bool) -> str | None:
        """The oldest recorded release from which every recorded release works on 4.x (pinned or not)."""
        first = None
        for release in self.releases.get(library, ()):
            works = self.works_on_4x(library, release, pinned)
            if works is False:
                first = None
            elif works and first is None:
                first = release
        return first

    def failures_4x(self, library: str, pinned: bool) -> list[Run]:
        return [
            r for r in self.runs if r.library == library and r.pinned == pinned and _is_4x(r.broker) and not r.works
        ]

    def advice(self, verdict: Verdict, removed: Iterable[str]) -> dict[str, str]:
        """Cause, symptom and fix for a client that sent versions Kafka 4.x removed (kproto.analyze.fingerprint_advice)."""
        return fingerprint_advice.advice(self, verdict, removed)


@lru_cache(maxsize=1)
def table() -> Table:
    """The table, from the real-broker recording (kproto.analyze.client_recordings)."""
    from kproto.analyze import client_recordings

    return Table(runs_of(client_recordings.RUNS))


def order_of_use(first_seen: dict[Pair, int | None]) -> list[Pair]:
    """Pairs in the order the client first used them (ties by API key and version)."""
    return sorted(first_seen, key=lambda p: (first_seen[p] is not None, first_seen[p] or 0, p))


def classify_row(
    client_id: str | None,
    api_order: Sequence[str] | None,
    software_name: str | None,
    software_version: str | None,
    api_versions_per_connection: int | None = None,
    client_software: Sequence[str] | None = None,
) -> dict:
    """The fingerprint columns of one ``clients`` row (both engines call this).

    ``client_software``: every "name/version" the row's connections sent; when programs sharing a
    client.id sent several names, the row says each (never a name of one with the version of another).
    """
    fingerprints = table()
    verdict = fingerprints.classify(
        client_id, api_pairs(api_order or ()), software_name, software_version, api_versions_per_connection
    )
    software, versions = verdict.library, verdict.range_text
    sent = sorted({s for s in client_software or () if s})
    if len({s.split("/", 1)[0] for s in sent}) > 1:
        named = [(fingerprints.library_of(s.split("/", 1)[0]), s.split("/", 1)[1] if "/" in s else "") for s in sent]
        software = " + ".join(dict.fromkeys(lib for lib, _v in named))
        versions = " + ".join(f"{lib} {v}".strip() for lib, v in named)
    return {
        "likely_software": software,
        "likely_versions": versions,
        "fingerprint_confidence": verdict.confidence,
        "fingerprint_mismatch": verdict.mismatch,
        "fingerprint_evidence": verdict.evidence,
    }


FINGERPRINT_COLUMNS = (
    "likely_software",
    "likely_versions",
    "fingerprint_confidence",
    "fingerprint_mismatch",
    "fingerprint_evidence",
)
