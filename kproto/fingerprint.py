"""Which client library (and which releases of it) a client is, from what it sends.

The facts are in :mod:`kproto.fingerprint_data`, recorded by
tools/record_fingerprints.py: real releases of kafka-python, aiokafka,
confluent-kafka (librdkafka) and kproto, each driven through the same scripted
run against kproto's fake brokers of several Kafka releases. A client is
described by what the ``clients`` table holds: its client.id, the (API,
version) pairs it used in the order it first used them, and the KIP-511
software name and version when its ApiVersions request carried them.

The request header version follows from (API, version), so it tells nothing the
pairs do not. What tells libraries and releases apart: the versions each
release asks for (a newer release asks for newer versions where the broker has
them), the requests it opens with (ApiVersions v0 / v3, or Metadata first), and the
default client.id (``kafka-python-producer-1``, ``aiokafka-0.12.0``,
``rdkafka``), and how many ApiVersions requests it sends on one connection
(kafka-python 1.4 asks twice on the connection it then uses; aiokafka 0.7, built on
kafka-python 1.4's protocol classes and otherwise sending the same pairs in the same
order, asks once per connection).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache, cache

Pair = tuple[int, int]

HIGH, MEDIUM, LOW, KIP511 = "high", "medium", "low", "KIP-511"


def api_pairs(labels: Iterable[str]) -> list[Pair]:
    """(API key, version) of each "Name vN" label of the ``apis`` / ``api_order`` columns."""
    from kproto import versions as kv

    pairs = []
    for label in labels:
        name, _, version = label.rpartition(" v")
        key = int(name[8:-1]) if name.startswith("UNKNOWN(") else kv.api_key_of(name)
        pairs.append((key, int(version)))
    return pairs


def release_key(release: str) -> tuple[int, ...]:
    """A release string as numbers for ordering ("2.0.10" after "2.0.2"); text without digits sorts first."""
    match = re.match(r"\d+(?:\.\d+)*", release)
    return tuple(int(p) for p in match.group(0).split(".")) if match else ()


@dataclass(frozen=True)
class Run:
    """One recorded run: one library release against one fake broker release."""

    library: str
    release: str
    broker: str
    pinned: bool
    pairs: frozenset[Pair]          # every (API, version) any of its clients used
    openings: frozenset[tuple[Pair, ...]]   # the first requests of each of its clients, in order
    default_ids: tuple[str, ...]    # the client.id the library chose when given none
    software: tuple[tuple[str, str], ...]   # KIP-511 (name, version) it announced
    handshakes: frozenset[int] = frozenset()   # its clients' most ApiVersions requests on one connection


@dataclass(frozen=True)
class Verdict:
    """What the fingerprint says about one client."""

    library: str | None
    releases: tuple[str, ...]       # the recorded releases it may be, oldest first
    confidence: str | None          # high / medium / low, or KIP-511 when the client named itself
    versions: str | None = None     # the version text shown (a range, or the KIP-511 version)
    mismatch: str | None = None     # KIP-511 name and wire disagree: what each says
    pinned: bool = False            # only runs pinned to an old api_version sent these pairs

    @property
    def range_text(self) -> str | None:
        if self.versions is not None:
            return self.versions
        if not self.releases:
            return None
        first, last = self.releases[0], self.releases[-1]
        return first if first == last else f"{first} .. {last}"


class Table:
    """The recorded runs, indexed for classifying."""

    def __init__(self, runs: Sequence[Run], releases: dict[str, tuple[str, ...]]) -> None:
        self.runs = tuple(runs)
        self.releases = releases
        self.span: dict[tuple[str, str], dict[int, tuple[int, int]]] = {}
        self.top: dict[tuple[str, str], dict[int, int]] = {}
        self.names: dict[str, str] = {}
        self.id_patterns: list[tuple[re.Pattern, str]] = []
        self.exact_ids: dict[str, set[tuple[str, str]]] = {}
        for run in self.runs:
            key = (run.library, run.release)
            span = self.span.setdefault(key, {})
            top = self.top.setdefault(key, {})
            for api, version in run.pairs:
                lo, hi = span.get(api, (version, version))
                span[api] = (min(lo, version), max(hi, version))
                if not run.pinned:
                    top[api] = max(top.get(api, version), version)
            for name, _version in run.software:
                self.names[name] = run.library
            for client_id in run.default_ids:
                self.exact_ids.setdefault(client_id, set()).add(key)
                pattern = re.compile("".join(r"\d+" if part.isdigit() else re.escape(part)
                                             for part in re.split(r"(\d+)", client_id)))
                if (pattern.pattern, run.library) not in {(p.pattern, lib) for p, lib in self.id_patterns}:
                    self.id_patterns.append((pattern, run.library))

    def ordered(self, library: str, releases: Iterable[str]) -> tuple[str, ...]:
        wanted = set(releases)
        return tuple(r for r in self.releases.get(library, ()) if r in wanted)

    def id_hint(self, client_id: str | None) -> tuple[str | None, set[tuple[str, str]]]:
        """(library whose default client.id this looks like, the releases with exactly this id)."""
        if not client_id:
            return None, set()
        exact = self.exact_ids.get(client_id, set())
        for pattern, library in self.id_patterns:
            if pattern.fullmatch(client_id):
                return library, exact
        return None, set()

    def candidates(self, order: Sequence[Pair], handshakes: int | None = None) -> tuple[set[tuple[str, str]], str]:
        """The releases the pairs fit, and how well: recorded (high), interpolated (medium) or partial (low).

        Among the recorded runs that used every pair, those whose clients opened the same way (the
        longest common start of the first requests) win: libraries that share a protocol layer
        (aiokafka on kafka-python's) ask for the same versions but not in the same order. Before
        that, when the client's most ApiVersions requests on one connection (``handshakes``) is
        known and some of those runs had a client do the same, only they stay.
        """
        observed = set(order)
        fitting = [r for r in self.runs if observed <= r.pairs]
        same_handshakes = [r for r in fitting if handshakes in r.handshakes]
        if same_handshakes:
            fitting = same_handshakes
        if fitting:
            opening = {id(r): max((_common_start(order, o) for o in r.openings), default=0) for r in fitting}
            best = max(opening.values())
            return {(r.library, r.release) for r in fitting if opening[id(r)] == best}, HIGH
        within = {key for key, span in self.span.items()
                  if all(api in span and span[api][0] <= v <= span[api][1] for api, v in observed)}
        if within:
            # Between two recorded broker releases: the releases whose own newest versions it hits most.
            score = {key: sum(self.top[key].get(api) == v for api, v in observed) for key in within}
            return {k for k in within if score[k] == max(score.values())}, MEDIUM
        score = {key: sum(api in span and span[api][0] <= v <= span[api][1] for api, v in observed)
                 for key, span in self.span.items()}
        best = max(score.values(), default=0)
        return ({k for k in score if score[k] == best} if best else set()), LOW

    def classify_wire(self, client_id: str | None, order: Sequence[Pair], handshakes: int | None = None) -> Verdict:
        """The verdict from the client.id, the pairs and the ApiVersions requests per connection (no KIP-511 name)."""
        if not order:
            return Verdict(None, (), None)
        fits, level = self.candidates(order, handshakes)
        hint, exact = self.id_hint(client_id)
        libraries = {library for library, _ in fits}
        if hint is not None and (hint in libraries or not libraries):
            library = hint
            if not fits & {(hint, r) for r in self.releases.get(hint, ())}:
                fits, level = {(hint, r) for r in self.releases.get(hint, ())}, LOW
        elif len(libraries) == 1:
            library = next(iter(libraries))
        elif libraries:
            counts = {lib: sum(1 for found, _ in fits if found == lib) for lib in libraries}
            library = max(sorted(libraries), key=lambda lib: counts[lib])
            level = LOW
        else:
            return Verdict(None, (), LOW)
        releases = {r for lib, r in fits if lib == library}
        if exact & {(library, r) for r in releases}:
            releases = {r for lib, r in exact if lib == library and r in releases}
        if len(libraries) > 1 and hint == library and level == HIGH:
            level = MEDIUM
        observed = set(order)
        fitting = [r for r in self.runs if r.library == library and r.release in releases and observed <= r.pairs]
        if any(handshakes in r.handshakes for r in fitting):
            fitting = [r for r in fitting if handshakes in r.handshakes]
        pinned = bool(fitting) and all(r.pinned for r in fitting)
        return Verdict(library, self.ordered(library, releases), level, pinned=pinned)

    def classify(self, client_id: str | None, order: Sequence[Pair], software_name: str | None = None,
                 software_version: str | None = None, handshakes: int | None = None) -> Verdict:
        """The verdict: a KIP-511 name wins; the wire's verdict cross-checks it."""
        wire = self.classify_wire(client_id, order, handshakes)
        if not software_name:
            return wire
        library = self.names.get(software_name, software_name)
        named = Verdict(library, (), KIP511, software_version)
        if wire.library is None or wire.confidence == LOW or library not in self.releases:
            return named   # nothing to check a name against that the table does not know
        said = f"KIP-511 says {software_name} {software_version}; the wire looks like {wire.library} " \
               f"{wire.range_text}"
        if wire.library != library:
            return Verdict(library, (), KIP511, software_version, said)
        version = release_key(software_version or "")
        if version and wire.releases and library in self.releases and not (
                release_key(wire.releases[0]) <= version <= release_key(wire.releases[-1])
                or release_key(wire.releases[-1]) == release_key(self.releases[library][-1]) <= version):
            return Verdict(library, (), KIP511, software_version, said)
        return named

    # ------------------------------------------------------------ what to do (Kafka 4.x)
    def uses_removed(self, library: str, release: str) -> bool:
        """The release, negotiating freely with a 4.x broker, still sends a version Kafka 4.x removed."""
        runs = [r for r in self.runs if (r.library, r.release) == (library, release) and not r.pinned]
        newest = max((r.broker for r in runs), key=release_key, default=None)
        return any(_removed(pair) for r in runs if r.broker == newest for pair in r.pairs)

    def first_ready(self, library: str) -> str | None:
        """The first recorded release of the library that sends no version Kafka 4.x removed."""
        return next((r for r in self.releases.get(library, ()) if not self.uses_removed(library, r)), None)

    def advice(self, verdict: Verdict, removed: Iterable[str]) -> tuple[str, str]:
        """(cause, fix) for a client that sent versions Kafka 4.x removed."""
        removed_text = ", ".join(removed)
        library = verdict.library
        if library not in self.releases:
            return (f"removed versions ({removed_text}); the library is not in the fingerprint table",
                    "upgrade the client to a release that negotiates versions Kafka 2.1+ serves")
        first = self.first_ready(library)
        candidates = verdict.releases or self._releases_near(library, verdict.versions)
        ready = [r for r in candidates if not self.uses_removed(library, r)]
        upgrade = f"upgrade {library} to {first} or later" if first else \
            f"no recorded {library} release avoids them: replace the library"
        if ready and (verdict.pinned or len(ready) == len(candidates)):
            who = "it" if len(ready) == len(candidates) else f"{ready[0]} and later"
            cause = (f"an api_version pin: {library} {verdict.range_text} sends these ({removed_text}) only when "
                     f"pinned to an old broker version; {who} negotiates supported versions by itself")
            fix = "remove the api_version setting (or set it to the broker's release)"
            if len(ready) < len(candidates):
                fix += f"; on a release before {first}, also {upgrade}"
            return cause, fix
        return f"removed versions ({removed_text}): {library} {verdict.range_text} sends them", upgrade

    def _releases_near(self, library: str, version: str | None) -> tuple[str, ...]:
        """The recorded release a KIP-511 version names, or the newest recorded one before it."""
        wanted = release_key(version or "")
        if not wanted:
            return ()
        before = [r for r in self.releases[library] if release_key(r) and release_key(r) <= wanted]
        return (before[-1],) if before else ()


def _common_start(order: Sequence[Pair], opening: tuple[Pair, ...]) -> int:
    count = 0
    for seen, recorded in zip(order, opening):
        if tuple(seen) != recorded:
            break
        count += 1
    return count


@cache
def _removed(pair: Pair) -> bool:
    from kproto import versions as kv

    try:
        return bool(kv.version_info(pair[0], pair[1]).removed_in_4x)
    except (KeyError, ValueError):
        return False


@lru_cache(maxsize=1)
def table() -> Table:
    """The recorded table (kproto.fingerprint_data)."""
    from kproto import fingerprint_data as data

    return Table([Run(lib, rel, broker, pinned, frozenset(pairs), frozenset(openings), tuple(ids),
                      tuple((name, version) for name, version in software), frozenset(handshakes))
                  for lib, rel, broker, pinned, pairs, openings, ids, software, handshakes in data.RUNS],
                 data.RELEASES)


def order_of_use(first_seen: dict[Pair, int | None]) -> list[Pair]:
    """Pairs in the order the client first used them (ties by API key and version)."""
    return sorted(first_seen, key=lambda p: (first_seen[p] is not None, first_seen[p] or 0, p))


def classify_row(client_id: str | None, api_order: Sequence[str] | None, software_name: str | None,
                 software_version: str | None, api_versions_per_connection: int | None = None) -> dict:
    """The fingerprint columns of one ``clients`` row (both engines call this)."""
    verdict = table().classify(client_id, api_pairs(api_order or ()), software_name, software_version,
                               api_versions_per_connection)
    return {"likely_software": verdict.library, "likely_versions": verdict.range_text,
            "fingerprint_confidence": verdict.confidence, "fingerprint_mismatch": verdict.mismatch}


def evaluate(clients: Iterable[tuple], fingerprints: Table | None = None, *, kip511: bool = True) -> dict:
    """How the verdicts do on clients of known truth.

    ``clients``: (library, release, broker, client_id, pairs in order, software, most ApiVersions
    requests on one connection) rows.
    ``kip511``: the verdict the clients table shows (a KIP-511 name wins), or, False, the
    wire's fingerprint alone. A version range is right when the true release lies between its
    ends; a KIP-511 version when it names the true release.
    """
    fingerprints = fingerprints or table()
    confusion: dict[str, dict[str, int]] = {}
    wrong = []
    right_library = right_range = total = 0
    for library, release, broker, client_id, order, software, handshakes in clients:
        pairs = [tuple(p) for p in order]
        if kip511 and software:
            verdict = fingerprints.classify(client_id, pairs, software[0], software[1], handshakes)
        else:
            verdict = fingerprints.classify_wire(client_id, pairs, handshakes)
        predicted = verdict.library or "none"
        row = confusion.setdefault(library, {})
        row[predicted] = row.get(predicted, 0) + 1
        total += 1
        ranked = fingerprints.releases.get(library, ())
        if verdict.releases:
            in_range = predicted == library and release in ranked and \
                ranked.index(verdict.releases[0]) <= ranked.index(release) <= ranked.index(verdict.releases[-1])
        else:
            in_range = predicted == library and release_key(verdict.versions or "") == release_key(release)
        right_library += predicted == library
        right_range += in_range
        if not in_range:
            wrong.append((library, release, broker, client_id, predicted, verdict.range_text, verdict.confidence))
    return {"clients": total, "right_library": right_library, "right_range": right_range,
            "confusion": confusion, "wrong": wrong}


def confusion_markdown(result: dict) -> str:
    """The confusion table (true library per row, named library per column) and the figures, as Markdown."""
    named = sorted({p for row in result["confusion"].values() for p in row})
    lines = ["| true \\ named | " + " | ".join(named) + " |", "|---" * (len(named) + 1) + "|"]
    for library in sorted(result["confusion"]):
        lines.append(f"| {library} | " + " | ".join(str(result["confusion"][library].get(p, 0)) for p in named)
                     + " |")
    total = result["clients"]
    lines.append("")
    lines.append(f"Right library: {result['right_library']} of {total}; right version range: "
                 f"{result['right_range']} of {total} ({100 * result['right_range'] / max(total, 1):.1f} %).")
    return "\n".join(lines) + "\n"


FINGERPRINT_COLUMNS = ("likely_software", "likely_versions", "fingerprint_confidence", "fingerprint_mismatch")
