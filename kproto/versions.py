"""Version negotiation and the Kafka 4.x baseline.

Everything here is derived, at import time, from the generated protocol facts in
:mod:`kproto.schema._messages` (``MESSAGES`` and ``BROKER_API_VERSIONS``) and the answers
of real brokers in :mod:`kproto.broker_recordings` (3.9 and 4.x, see :func:`broker_api_versions`):

* :func:`api_table` / :func:`api_info`: every API kproto has a schema for, with its
  version range, first flexible version, the versions KIP-896 marked deprecated and
  the versions Kafka 4.x really removed;
* :data:`RELEASES` / :func:`release_table`: what each Apache Kafka broker release
  from 0.8.0 to 4.4 advertises in its ApiVersionsResponse;
* :func:`negotiate`: the highest version a client and a broker (or every broker of
  a cluster, KIP-35) both speak, raising :class:`ObsoleteBrokerVersion` (KIP-97)
  when an API the caller requires has none;
* :func:`check_features`: which client features (sets of API version requirements)
  a broker or a cluster can serve;
* :func:`infer_release`: which release(s) an ApiVersionsResponse matches;
* :class:`ApiVersionsHandshake` / :func:`handshake`: the KIP-511 ApiVersions
  exchange with its UNSUPPORTED_VERSION fallback, and the ClientSoftwareName /
  ClientSoftwareVersion validation;
* :func:`version_info`: for one (API, version), whether it is deprecated, removed
  in 4.x, and which releases serve it.

Ranges are plain ``{api_key: (min_version, max_version)}`` dicts throughout; every
function that takes ranges also accepts an ApiVersionsResponse (body or decoded
:class:`kproto.Response`), a release name such as ``"3.9"``, or ``(key, min, max)`` rows.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kproto import schema
from kproto._common.api_keys import CLIENT_SOFTWARE_FIRST_VERSION, ApiKey
from kproto._version import __version__
from kproto.broker_recordings import API_VERSIONS as _RECORDED_API_VERSIONS
from kproto.broker_recordings import RECORDED_FROM
from kproto.errors import DecodeError, EncodeError, KprotoError, error_name
from kproto.schema._messages import BROKER_API_VERSIONS, MESSAGES

__all__ = [
    "Ranges", "ApiInfo", "VersionInfo", "ObsoleteBrokerVersion", "ApiVersionsError",
    "InvalidClientSoftwareError", "FeatureCheck", "ReleaseMatch", "ReleaseChange",
    "RELEASES", "RECORDED_FROM", "KNOWN_UNKNOWN_API_KEYS", "ADVERTISED_BUT_REJECTED", "broker_api_versions",
    "api_table", "api_info", "api_key_of", "api_name", "api_label", "kproto_ranges",
    "release_table", "resolve_release", "releases_between", "release_changes", "release_mode",
    "as_ranges", "cluster_ranges", "baseline_4x", "negotiate", "usable_version", "check_features",
    "infer_release", "version_info", "format_releases",
    "CLIENT_SOFTWARE_PATTERN", "client_software_problems", "api_versions_request",
    "encode_api_versions_request", "decode_api_versions_request", "retry_version",
    "ApiVersionsHandshake", "HandshakeResult", "handshake", "socket_exchange",
]

Ranges = dict[int, tuple[int, int]]

API_VERSIONS_KEY = ApiKey.API_VERSIONS
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
_FIRST_4X = (4, 0)


# ====================================================================== releases
def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def _age(release: str) -> tuple[int, ...]:
    """Sort key: a recorded line ages as the patch recorded for it ("4.0" as 4.0.2, after "4.0.0")."""
    return _release_key(RECORDED_FROM.get(release, release))


def broker_api_versions() -> tuple[tuple[str, int, int, int], ...]:
    """The broker-release table as ``(release, api_key, min_version, max_version)`` rows.

    The releases recorded from real brokers (:data:`RECORDED_FROM`: 3.9 and 4.x, by
    tools/record_brokers.py) come from :mod:`kproto.broker_recordings`; the older ones
    from the reference table the message definitions came with (``BROKER_API_VERSIONS``).
    """
    kept = tuple(row for row in BROKER_API_VERSIONS if row[0] not in RECORDED_FROM)
    return kept + tuple(_RECORDED_API_VERSIONS)


def _build_release_tables() -> dict[str, Ranges]:
    tables: dict[str, Ranges] = {}
    for release, api_key, lo, hi in broker_api_versions():
        tables.setdefault(release, {})[api_key] = (lo, hi)
    return dict(sorted(tables.items(), key=lambda item: _age(item[0])))


_RELEASE_TABLES = _build_release_tables()
_ZOOKEEPER_API_KEY = ApiKey.LEADER_AND_ISR   # only ZooKeeper-mode brokers advertise it


def _build_zookeeper_mode_tables() -> dict[str, Ranges]:
    """Reference tables replaced by a recording of a KRaft broker but read off a ZooKeeper-mode
    broker (they advertise LeaderAndIsr): 3.9. Kept so that such a broker is still named."""
    tables: dict[str, Ranges] = {}
    for release, api_key, lo, hi in BROKER_API_VERSIONS:
        if release in RECORDED_FROM:
            tables.setdefault(release, {})[api_key] = (lo, hi)
    return {r: t for r, t in tables.items()
            if _ZOOKEEPER_API_KEY in t and _ZOOKEEPER_API_KEY not in _RELEASE_TABLES[r]}


_ZOOKEEPER_MODE_TABLES = _build_zookeeper_mode_tables()


def zookeeper_mode_table(release: str) -> Ranges | None:
    """What a ZooKeeper-mode broker of this release advertises, for a release whose table
    (:func:`release_table`) was recorded from a KRaft broker (3.9: the last release with both
    modes); None for the others, whose one table is their only mode's."""
    table = _ZOOKEEPER_MODE_TABLES.get(resolve_release(release))
    return None if table is None else dict(table)


_KRAFT_API_KEY = ApiKey.DESCRIBE_QUORUM      # only KRaft brokers advertise it


def release_mode(release: str) -> str:
    """``"ZooKeeper"`` or ``"KRaft"``: the mode of the broker a release's table was read off (a
    KRaft broker advertises DescribeQuorum and not LeaderAndIsr). 3.8 and older: ZooKeeper; 3.9 on: KRaft."""
    table = _RELEASE_TABLES[resolve_release(release)]
    return "KRaft" if _KRAFT_API_KEY in table and _ZOOKEEPER_API_KEY not in table else "ZooKeeper"

#: Every broker release in the table, oldest first (``"0.8.0"`` ... ``"4.4"``).
RELEASES: tuple[str, ...] = tuple(_RELEASE_TABLES)
_RELEASES_4X = tuple(r for r in RELEASES if _release_key(r) >= _FIRST_4X)


def resolve_release(text: str) -> str:
    """The table release a version string refers to: ``"3.6.1"`` -> ``"3.6"``,
    ``"0.10.2.1"`` -> ``"0.10.2"``, ``"4.0"`` -> ``"4.0"``.

    Patch releases share their release line's table. Raises ValueError for a
    version that names no release, or several (``"0.10"`` could be 0.10.0-0.10.2).
    """
    text = text.strip().lstrip("vV")
    try:
        wanted = _release_key(text)
    except ValueError:
        raise ValueError(f"not a Kafka release: {text!r}") from None
    # the longest table release whose components start the asked version
    prefixes = [r for r in RELEASES if wanted[:len(_release_key(r))] == _release_key(r)]
    if prefixes:
        return max(prefixes, key=lambda r: len(_release_key(r)))
    extensions = [r for r in RELEASES if _release_key(r)[:len(wanted)] == wanted]
    if extensions:
        raise ValueError(f"{text} is ambiguous: it could be {', '.join(extensions)}")
    raise ValueError(f"no broker release {text} in the table (known: {RELEASES[0]} to {RELEASES[-1]})")


def release_table(release: str) -> Ranges:
    """What a broker of this release advertises: ``{api_key: (min, max)}`` (a copy)."""
    return dict(_RELEASE_TABLES[resolve_release(release)])


def releases_between(first: str, last: str) -> tuple[str, ...]:
    """The table releases from ``first`` to ``last`` inclusive, oldest first."""
    lo, hi = sorted((RELEASES.index(resolve_release(first)), RELEASES.index(resolve_release(last))))
    return RELEASES[lo:hi + 1]


# ====================================================================== the API table
def _request_specs() -> dict[int, tuple[str, dict]]:
    found: dict[int, tuple[str, dict]] = {}
    for name, info in MESSAGES.items():
        spec: dict[str, Any] = info
        if spec["type"] == "request":
            found[spec["api_key"]] = (name[: -len("Request")], spec)
    return dict(sorted(found.items()))


_REQUESTS = _request_specs()

#: API keys that broker releases advertise but kproto has no definition for (4.2+:
#: streams groups, share-group offsets): known to exist, decoded header only.
KNOWN_UNKNOWN_API_KEYS: frozenset[int] = frozenset(
    key for table in _RELEASE_TABLES.values() for key in table if key not in _REQUESTS)


@dataclass(frozen=True)
class ApiInfo:
    """One API kproto has a schema for.

    ``removed_in_4x`` is the range of versions Kafka 4.x no longer serves (None
    when nothing was removed, or when that is unknown: see ``removed_source``):

    * ``"4.x definitions"``: below the lowest version of the 4.x message definitions;
    * ``"ZooKeeper-only"``: an inter-broker API of ZooKeeper mode, gone with it;
    * ``"4.x broker tables"``: no 4.x definition in the reference data, but 4.x
      brokers stopped advertising the lower versions;
    * ``"unknown"``: neither (controller-only APIs, which brokers do not advertise).
    """

    api_key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None
    deprecated: tuple[int, int] | None
    removed_in_4x: tuple[int, int] | None
    removed_source: str
    listeners: tuple[str, ...]
    latest_version_unstable: bool

    @property
    def versions(self) -> tuple[int, int]:
        return (self.min_version, self.max_version)


def _removed_in_4x(api_key: int, info: dict) -> tuple[tuple[int, int] | None, str]:
    lo, hi = info["valid_versions"]
    floor_4x = info["min_version_4x"]
    if floor_4x is not None:
        return ((lo, floor_4x - 1) if floor_4x > lo else None), "4.x definitions"
    if info["listeners"] and set(info["listeners"]) == {"zkBroker"}:
        return (lo, hi), "ZooKeeper-only"
    advertised_mins = [_RELEASE_TABLES[r][api_key][0] for r in _RELEASES_4X if api_key in _RELEASE_TABLES[r]]
    if advertised_mins:
        floor = min(advertised_mins)
        return ((lo, floor - 1) if floor > lo else None), "4.x broker tables"
    return None, "unknown"


def _build_api_table() -> dict[int, ApiInfo]:
    table = {}
    for api_key, (name, info) in _REQUESTS.items():
        lo, hi = info["valid_versions"]
        flexible = info["flexible_versions"]
        removed, source = _removed_in_4x(api_key, info)
        table[api_key] = ApiInfo(
            api_key=api_key, name=name, min_version=lo, max_version=hi,
            flexible_from=flexible[0] if flexible else None,
            deprecated=info["deprecated_versions"], removed_in_4x=removed, removed_source=source,
            listeners=tuple(info["listeners"] or ()),
            latest_version_unstable=bool(info["latest_version_unstable"]),
        )
    return table


_API_TABLE = _build_api_table()
_BY_NAME = {info.name.lower(): key for key, info in _API_TABLE.items()}
for _old, _new in schema.ALIASES.items():  # old API names still resolve
    if _old.endswith("Request") and _new[: -len("Request")].lower() in _BY_NAME:
        _BY_NAME[_old[: -len("Request")].lower()] = _BY_NAME[_new[: -len("Request")].lower()]


def api_table() -> list[ApiInfo]:
    """Every API kproto has a schema for, by API key."""
    return list(_API_TABLE.values())


def api_key_of(api: int | str) -> int:
    """The API key of ``api``: a key, or a name (``"Produce"``, ``"ProduceRequest"``, any case)."""
    if isinstance(api, bool):
        raise TypeError("an API is a key or a name, not a bool")
    if isinstance(api, int):
        return api
    text = str(api).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    lowered = text.lower()
    if lowered.endswith("request") or lowered.endswith("response"):
        lowered = lowered[: -len("request")] if lowered.endswith("request") else lowered[: -len("response")]
    try:
        return _BY_NAME[lowered]
    except KeyError:
        raise KeyError(f"unknown Kafka API {api!r}") from None


def api_info(api: int | str) -> ApiInfo:
    """The :class:`ApiInfo` of an API key or name; KeyError if kproto has no schema for it."""
    key = api_key_of(api)
    try:
        return _API_TABLE[key]
    except KeyError:
        known_unknown = " (a known API newer than kproto's definitions)" if key in KNOWN_UNKNOWN_API_KEYS else ""
        raise KeyError(f"kproto has no definition for api_key {key}{known_unknown}") from None


def api_name(api_key: int) -> str:
    """The Kafka name of an API (``Produce``), or ``UNKNOWN(<key>)`` without a definition."""
    info = _API_TABLE.get(api_key)
    return info.name if info is not None else f"UNKNOWN({api_key})"


def api_label(api_key: int) -> str:
    """``Produce(0)``, or ``UNKNOWN(90)`` for a key without a definition (as Kafka's tools print it)."""
    info = _API_TABLE.get(api_key)
    return f"{info.name}({api_key})" if info is not None else f"UNKNOWN({api_key})"


def kproto_ranges() -> Ranges:
    """The versions kproto can encode and decode, per API key."""
    return {key: info.versions for key, info in _API_TABLE.items()}


def _in(version: int, versions: tuple[int, int] | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


#: ``{release: {api_key: (lo, hi)}}``: versions a 4.x release advertises although the
#: 4.x definitions no longer have them, so the broker rejects them. Derived from the
#: data; it holds Produce v0-2 (KAFKA-18659: kept in ApiVersions for librdkafka).
ADVERTISED_BUT_REJECTED: dict[str, dict[int, tuple[int, int]]] = {}
for _release in _RELEASES_4X:
    for _key, (_lo, _hi) in _RELEASE_TABLES[_release].items():
        _info = _API_TABLE.get(_key)
        if _info is not None and _info.removed_source == "4.x definitions" and _info.removed_in_4x:
            _gone_hi = min(_info.removed_in_4x[1], _hi)
            if _lo <= _gone_hi:
                ADVERTISED_BUT_REJECTED.setdefault(_release, {})[_key] = (_lo, _gone_hi)


# ====================================================================== per (api, version)
@dataclass(frozen=True)
class VersionInfo:
    """What is known about one version of one API.

    ``releases`` are the broker releases that serve it (advertise it and accept it);
    ``advertised_but_rejected`` the 4.x releases that advertise it only (KAFKA-18659).
    ``removed_in_4x`` is None when unknown (see :class:`ApiInfo`).
    """

    api_key: int
    name: str
    version: int
    defined: bool
    flexible: bool
    deprecated: bool
    removed_in_4x: bool | None
    removed_source: str
    releases: tuple[str, ...]
    advertised_but_rejected: tuple[str, ...]
    notes: tuple[str, ...] = ()

    @property
    def first_release(self) -> str | None:
        return self.releases[0] if self.releases else None

    @property
    def last_release(self) -> str | None:
        return self.releases[-1] if self.releases else None

    @property
    def not_served_by_4x(self) -> tuple[str, ...]:
        """The 4.x releases of the table that do not serve it, e.g. ``("4.0.0",)`` for JoinGroup v0."""
        return tuple(r for r in _RELEASES_4X if r not in self.releases)

    @property
    def in_latest_release(self) -> bool:
        """Served by the newest release in the table."""
        return bool(self.releases) and self.releases[-1] == RELEASES[-1]


def _spans(releases: Iterable[str]) -> list[tuple[str, str]]:
    """Contiguous runs of table releases: [("0.9", "3.9"), ("4.1", "4.3")]."""
    runs: list[tuple[str, str]] = []
    last_index = None
    for release in releases:
        index = RELEASES.index(release)
        if runs and last_index is not None and index == last_index + 1:
            runs[-1] = (runs[-1][0], release)
        else:
            runs.append((release, release))
        last_index = index
    return runs


def format_releases(releases: Iterable[str]) -> str:
    """``0.9-3.9, 4.1-4.3`` (``none`` when empty)."""
    runs = _spans(releases)
    if not runs:
        return "none"
    return ", ".join(a if a == b else f"{a}-{b}" for a, b in runs)


def version_info(api: int | str, version: int) -> VersionInfo:
    """Deprecated? removed in 4.x? first and last Kafka release that serves it?"""
    key = api_key_of(api)
    info = _API_TABLE.get(key)
    advertised = [r for r in RELEASES if _in(version, _RELEASE_TABLES[r].get(key))]
    rejected = tuple(r for r in advertised if _in(version, ADVERTISED_BUT_REJECTED.get(r, {}).get(key)))
    served = tuple(r for r in advertised if r not in rejected)
    notes = []
    if info is None:
        return VersionInfo(key, api_name(key), version, False, False, False, None, "unknown", served, rejected,
                           ("kproto has no definition for this API",))
    defined = _in(version, info.versions)
    deprecated = _in(version, info.deprecated)
    if info.removed_source == "unknown":
        removed: bool | None = None
    else:
        removed = _in(version, info.removed_in_4x)
    if not defined:
        notes.append(f"kproto defines {info.name} v{info.min_version}-{info.max_version} only")
    if deprecated and removed is False:
        notes.append("deprecated by KIP-896 but still served by Kafka 4.x")
    if rejected:
        why = " (KAFKA-18659, kept for librdkafka)" if key == ApiKey.PRODUCE else ""
        notes.append(f"advertised by {format_releases(rejected)} but rejected{why}")
    if len(_spans(served)) > 1:
        notes.append(f"not continuously served: {format_releases(served)}")
    return VersionInfo(key, info.name, version, defined, _in(version, (info.flexible_from, 0x7FFF))
                       if info.flexible_from is not None else False,
                       deprecated, removed, info.removed_source, served, rejected, tuple(notes))


# ====================================================================== ranges
class ObsoleteBrokerVersion(KprotoError):
    """KIP-97: the broker (or cluster) shares no version of an API the client requires.

    ``broker_range`` is None when the broker does not offer the API at all.
    """

    def __init__(self, api_key: int, client_range: tuple[int, int], broker_range: tuple[int, int] | None) -> None:
        self.api_key = api_key
        self.api_name = api_name(api_key)
        self.client_range = client_range
        self.broker_range = broker_range
        client = _range_text(client_range)
        if broker_range is None:
            detail = f"the broker does not offer it at all; the client supports {client}"
        else:
            side = "too new" if broker_range[0] > client_range[1] else "too old"
            detail = f"client supports {client}, broker supports {_range_text(broker_range)} (broker {side})"
        super().__init__(f"no common version of {api_label(api_key)}: {detail}")

    def __reduce__(self):
        return (type(self), (self.api_key, self.client_range, self.broker_range))


def _range_text(versions: tuple[int, int] | None) -> str:
    if versions is None:
        return "none"
    lo, hi = versions
    return f"v{lo}" if lo == hi else f"v{lo}-{hi}"


# ranges as a mapping, (api, min, max) rows, an ApiVersionsResponse or a release name
RangesLike = Any


def as_ranges(source: RangesLike) -> Ranges:
    """Normalise ranges: a ``{api: (min, max)}`` mapping (keys or names), an
    ApiVersionsResponse (body or :class:`kproto.Response`), a release name, or
    ``(api, min, max)`` rows."""
    if isinstance(source, str):
        return release_table(source)
    body: Any = getattr(source, "body", source)  # a decoded kproto.Response
    if type(body).__name__ == "ApiVersionsResponse" and hasattr(body, "api_keys"):
        return {int(e.api_key): (int(e.min_version), int(e.max_version)) for e in (body.api_keys or ())}
    if isinstance(source, Mapping):
        ranges = {}
        for api, versions in source.items():
            lo, hi = versions
            ranges[api_key_of(api)] = (int(lo), int(hi))
        return ranges
    ranges = {}
    for row in source:
        api, lo, hi = row
        ranges[api_key_of(api)] = (int(lo), int(hi))
    return ranges


def _is_broker_list(source: Any) -> bool:
    """A list of several brokers' ranges (as opposed to one broker's rows)."""
    if isinstance(source, (str, Mapping)) or not isinstance(source, (list, tuple)):
        return False
    def is_broker(item: Any) -> bool:
        if isinstance(item, (str, Mapping)) or hasattr(item, "api_keys") or hasattr(item, "body"):
            return True
        # a broker given as rows is a sequence of (api, min, max) sequences; a row holds scalars
        return isinstance(item, (list, tuple)) and all(isinstance(row, (list, tuple)) for row in item)

    return len(source) > 0 and all(is_broker(item) for item in source)


def cluster_ranges(brokers: Iterable[RangesLike]) -> Ranges:
    """The versions every broker supports (KIP-35): per API key present on all of
    them, the highest minimum and the lowest maximum. APIs whose ranges do not
    overlap across brokers are left out: no single version works everywhere."""
    tables = [as_ranges(b) for b in brokers]
    if not tables:
        return {}
    common = set(tables[0]).intersection(*tables[1:])
    combined = {}
    for key in sorted(common):
        lo = max(t[key][0] for t in tables)
        hi = min(t[key][1] for t in tables)
        if lo <= hi:
            combined[key] = (lo, hi)
    return combined


def _broker_side(broker_ranges: RangesLike) -> Ranges:
    return cluster_ranges(broker_ranges) if _is_broker_list(broker_ranges) else as_ranges(broker_ranges)


def usable_version(client: tuple[int, int], broker: tuple[int, int] | None) -> int | None:
    """The highest version in both ranges, or None."""
    if broker is None:
        return None
    lo, hi = max(client[0], broker[0]), min(client[1], broker[1])
    return hi if lo <= hi else None


def baseline_4x(ranges: RangesLike) -> Ranges:
    """Ranges with every version Kafka 4.x removed taken out (APIs left empty are dropped).

    A client negotiating from these never picks a version a 4.x broker rejects,
    including Produce v0-2, which 4.x brokers still advertise (KAFKA-18659).
    """
    clipped = {}
    for key, (lo, hi) in as_ranges(ranges).items():
        info = _API_TABLE.get(key)
        removed = info.removed_in_4x if info is not None else None
        if removed is not None and removed[0] <= lo <= removed[1]:
            lo = removed[1] + 1
        if lo <= hi:
            clipped[key] = (lo, hi)
    return clipped


def negotiate(client_ranges: RangesLike | None, broker_ranges: RangesLike, *,
              required: Iterable[int | str] | bool = (), kafka_4x_baseline: bool = False) -> dict[int, int]:
    """Per API key, the highest version both the client and the broker support.

    ``client_ranges`` None means kproto's own ranges. ``broker_ranges`` is one
    broker (ranges, an ApiVersionsResponse, a release name) or a list of several:
    several brokers combine into the range all of them support (KIP-35).
    APIs without a common version are left out of the result, unless ``required``
    names them (keys or names; ``True`` = every client API): then
    :class:`ObsoleteBrokerVersion` is raised for the first such API (KIP-97).
    ``kafka_4x_baseline`` first takes out of the client's ranges every version
    Kafka 4.x removed (:func:`baseline_4x`).
    """
    client = kproto_ranges() if client_ranges is None else as_ranges(client_ranges)
    if kafka_4x_baseline:
        client = baseline_4x(client)
    broker = _broker_side(broker_ranges)
    needed = set(client) if required is True else {api_key_of(a) for a in (required or ())}
    result = {}
    for key in sorted(set(client) | needed):
        if key not in client:
            raise KeyError(f"required API {api_label(key)} is not among the client's APIs")
        version = usable_version(client[key], broker.get(key))
        if version is not None:
            result[key] = version
        elif key in needed:
            raise ObsoleteBrokerVersion(key, client[key], broker.get(key))
    return result


# ====================================================================== features
@dataclass
class FeatureCheck:
    """Whether one client feature can be used, and with which versions."""

    name: str
    usable: bool
    versions: dict[int, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)


def check_features(features: Mapping[str, Iterable[tuple[int | str, int, int]]],
                   brokers: RangesLike) -> dict[str, FeatureCheck]:
    """Which features a broker, or a cluster (a list of brokers), can serve.

    A feature is a set of ``(api, min_version, max_version)`` requirements; it is
    usable when every one of its APIs has a version inside its requirement that
    the broker (every broker, for a cluster) supports.
    """
    offered = _broker_side(brokers)
    results = {}
    for name, requirements in features.items():
        check = FeatureCheck(name, True)
        for api, lo, hi in requirements:
            key = api_key_of(api)
            version = usable_version((lo, hi), offered.get(key))
            if version is None:
                check.usable = False
                have = offered.get(key)
                where = "not offered" if have is None else f"offered as {_range_text(have)}"
                check.problems.append(f"{api_name(key)} {_range_text((lo, hi))} needed, {where}")
            else:
                check.versions[key] = version
        results[name] = check
    return results


# ====================================================================== release inference
@dataclass(frozen=True)
class ReleaseMatch:
    """The outcome of :func:`infer_release`.

    ``exact`` holds every release whose table equals the response (several means
    ApiVersions alone cannot tell them apart). Without an exact match, ``closest``
    holds the releases with the fewest differing APIs and ``differences`` what
    differs for each of them. ``mode`` is ``"ZooKeeper"`` when the response equals the
    table of a ZooKeeper-mode broker of a release whose table is a KRaft broker's (3.9).
    """

    exact: tuple[str, ...]
    closest: tuple[str, ...]
    differences: dict[str, tuple[str, ...]]
    mode: str = ""

    @property
    def release(self) -> str | None:
        """The one release it must be, or None when that cannot be said."""
        return self.exact[0] if len(self.exact) == 1 else None

    def describe(self) -> str:
        if len(self.exact) == 1 and self.mode:
            return (f"{self.exact[0]} in {self.mode} mode (exact match with the table of a {self.mode}-mode "
                    f"{self.exact[0]} broker; patch releases of a line are not told apart)")
        if len(self.exact) == 1 and self.exact[0] in RECORDED_FROM:
            recorded = RECORDED_FROM[self.exact[0]]
            return (f"{self.exact[0]} (exact match with the answer of a real {recorded} broker; "
                    f"patch releases that advertise the same versions are not told apart)")
        if len(self.exact) == 1:
            return (f"{self.exact[0]} (exact match; patch releases of a line advertise the same "
                    f"versions and are not told apart)")
        if self.exact:
            return (f"ambiguous: {', '.join(self.exact)} advertise identical versions; "
                    f"ApiVersions alone cannot tell them apart")
        if not self.closest:
            return "unknown: no release to compare with"
        count = len(self.differences[self.closest[0]])
        which = " or ".join(self.closest)
        tie = " (a tie: cannot choose)" if len(self.closest) > 1 else ""
        return (f"no exact match; closest {which}{tie}, {count} API(s) differ: a patch or vendor build, "
                f"a broker with some APIs disabled or unstable ones enabled, or a release newer than the table")


def _table_differences(seen: Ranges, table: Ranges) -> tuple[str, ...]:
    diffs = []
    for key in sorted(set(seen) | set(table)):
        mine, theirs = seen.get(key), table.get(key)
        if mine == theirs:
            continue
        label = api_label(key)
        if theirs is None:
            diffs.append(f"{label}: advertised {_range_text(mine)}, not in the release")
        elif mine is None:
            diffs.append(f"{label}: not advertised, release has {_range_text(theirs)}")
        else:
            diffs.append(f"{label}: advertised {_range_text(mine)}, release has {_range_text(theirs)}")
    return tuple(diffs)


def infer_release(response: RangesLike) -> ReleaseMatch:
    """The broker release(s) whose advertised table matches an ApiVersionsResponse."""
    seen = as_ranges(response)
    differences = {r: _table_differences(seen, t) for r, t in _RELEASE_TABLES.items()}
    exact = tuple(r for r in RELEASES if not differences[r])
    if exact:
        return ReleaseMatch(exact, (), {})
    zookeeper = tuple(r for r, t in _ZOOKEEPER_MODE_TABLES.items() if not _table_differences(seen, t))
    if zookeeper:
        return ReleaseMatch(zookeeper, (), {}, mode="ZooKeeper")
    fewest = min(len(d) for d in differences.values())
    closest = tuple(r for r in RELEASES if len(differences[r]) == fewest)
    return ReleaseMatch((), closest, {r: differences[r] for r in closest})


# ====================================================================== release changes
@dataclass(frozen=True)
class ReleaseChange:
    """How one API changed between two releases (``before`` / ``after`` None: absent)."""

    api_key: int
    name: str
    before: tuple[int, int] | None
    after: tuple[int, int] | None

    @property
    def gained(self) -> list[int]:
        return sorted(set(_versions(self.after)) - set(_versions(self.before)))

    @property
    def lost(self) -> list[int]:
        return sorted(set(_versions(self.before)) - set(_versions(self.after)))

    def describe(self) -> str:
        label = api_label(self.api_key)
        if self.before is None:
            return f"+ {label}: new API, {_range_text(self.after)}"
        if self.after is None:
            return f"- {label}: API gone, was {_range_text(self.before)}"
        parts = []
        if self.gained:
            parts.append(f"gained {_list_text(self.gained)}")
        if self.lost:
            parts.append(f"lost {_list_text(self.lost)}")
        return f"~ {label}: {_range_text(self.before)} -> {_range_text(self.after)} ({', '.join(parts)})"


def _versions(versions: tuple[int, int] | None) -> range:
    return range(versions[0], versions[1] + 1) if versions else range(0)


def _list_text(versions: list[int]) -> str:
    runs: list[list[int]] = []
    for v in versions:
        if runs and v == runs[-1][1] + 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    return ", ".join(_range_text((a, b)) for a, b in runs)


def release_changes(before: str, after: str) -> list[ReleaseChange]:
    """What changed in the advertised APIs from release ``before`` to release ``after``."""
    old, new = release_table(before), release_table(after)
    return [ReleaseChange(key, api_name(key), old.get(key), new.get(key))
            for key in sorted(set(old) | set(new)) if old.get(key) != new.get(key)]


# ====================================================================== KIP-511 handshake
#: ClientSoftwareName / ClientSoftwareVersion (KIP-511): letters, digits, '.' and '-',
#: beginning and ending with a letter or digit (the broker's own check).
CLIENT_SOFTWARE_PATTERN = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9.\-]*[a-zA-Z0-9])?")


def _software_problem(label: str, value: Any) -> str | None:
    if value is None:
        return f"{label} is missing"
    if not isinstance(value, str):
        return f"{label} must be a string, not {type(value).__name__}"
    if value == "":
        return f"{label} is empty"
    if CLIENT_SOFTWARE_PATTERN.fullmatch(value):
        return None
    bad = sorted({c for c in value if not (c.isascii() and (c.isalnum() or c in ".-"))})
    if bad:
        return f"{label} {value!r} has characters outside [.-a-zA-Z0-9]: {''.join(bad)!r}"
    return f"{label} {value!r} must begin and end with a letter or digit"


def client_software_problems(name: Any, version: Any) -> list[str]:
    """Why a ClientSoftwareName / ClientSoftwareVersion pair breaks KIP-511 (empty: valid)."""
    return [p for p in (_software_problem("ClientSoftwareName", name),
                        _software_problem("ClientSoftwareVersion", version)) if p]


def _default_software_version() -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9.\-]", "-", __version__).strip(".-")
    return cleaned or "unknown"


DEFAULT_CLIENT_SOFTWARE_NAME = "kproto"
DEFAULT_CLIENT_SOFTWARE_VERSION = _default_software_version()
_API_VERSIONS_MAX = _API_TABLE[API_VERSIONS_KEY].max_version


class InvalidClientSoftwareError(EncodeError):
    """A ClientSoftwareName / ClientSoftwareVersion that brokers reject with INVALID_REQUEST."""


class ApiVersionsError(KprotoError):
    """The ApiVersions exchange failed: an error code other than UNSUPPORTED_VERSION, or no version left."""

    def __init__(self, reason: str, error_code: int | None = None) -> None:
        self.error_code = error_code
        super().__init__(reason)


def api_versions_request(version: int | None = None, *, client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
                         client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
                         allow_invalid: bool = False):
    """An ApiVersionsRequest body; from v3 on its software fields are checked (KIP-511)
    and invalid ones refused with :class:`InvalidClientSoftwareError` unless ``allow_invalid``."""
    from kproto.messages import ApiVersionsRequest

    version = _API_VERSIONS_MAX if version is None else version
    if version >= CLIENT_SOFTWARE_FIRST_VERSION and not allow_invalid:
        problems = client_software_problems(client_software_name, client_software_version)
        if problems:
            raise InvalidClientSoftwareError(
                "; ".join(problems) + " (brokers answer INVALID_REQUEST; pass allow_invalid=True to send it anyway)",
                path="ApiVersionsRequest", api_key=API_VERSIONS_KEY, api_version=version)
    return ApiVersionsRequest(client_software_name=client_software_name,
                              client_software_version=client_software_version)


def encode_api_versions_request(*, correlation_id: int, version: int | None = None, client_id: str | None = "kproto",
                                client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
                                client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
                                allow_invalid: bool = False, size_prefixed: bool = False) -> bytes:
    """An encoded ApiVersionsRequest (default: kproto's highest version), software fields checked."""
    import kproto

    version = _API_VERSIONS_MAX if version is None else version
    body = api_versions_request(version, client_software_name=client_software_name,
                                client_software_version=client_software_version, allow_invalid=allow_invalid)
    return kproto.encode_request(body, version=version, correlation_id=correlation_id, client_id=client_id,
                                 size_prefixed=size_prefixed)


def decode_api_versions_request(payload, *, size_prefixed: bool = False):
    """Decode an ApiVersionsRequest; returns ``(request, problems)`` where ``problems``
    lists what breaks KIP-511 in its software fields (always empty below v3)."""
    import kproto

    request = kproto.decode_request(payload, size_prefixed=size_prefixed)
    if request.api_key != API_VERSIONS_KEY:
        raise DecodeError(f"expected an ApiVersions request, got api_key {request.api_key}", 0,
                          api_key=request.api_key, api_version=request.api_version)
    problems: list[str] = []
    body: Any = request.body
    if request.api_version >= CLIENT_SOFTWARE_FIRST_VERSION:
        problems = client_software_problems(body.client_software_name, body.client_software_version)
    return request, problems


def retry_version(response: Any, sent_version: int) -> int:
    """The ApiVersions version to retry with after an UNSUPPORTED_VERSION answer (KIP-511).

    The answer is a v0 body; brokers since 2.4 put their own ApiVersions range in
    its ApiKeys: take that maximum, or 0 when the entry is absent. The result is
    kept below ``sent_version`` so a confused broker cannot make the client loop.
    """
    body = getattr(response, "body", response)
    advertised = [int(e.max_version) for e in (body.api_keys or ()) if int(e.api_key) == API_VERSIONS_KEY]
    version = advertised[0] if advertised else 0
    return max(0, min(version, sent_version - 1, _API_VERSIONS_MAX))


@dataclass
class HandshakeResult:
    """The finished exchange: the broker's answer and the versions tried, in order."""

    response: Any            # the ApiVersionsResponse body
    version: int             # the version of the request that succeeded
    attempts: list[int]      # every version sent, first to last

    @property
    def ranges(self) -> Ranges:
        return as_ranges(self.response)


class ApiVersionsHandshake:
    """The client side of the ApiVersions exchange, without any I/O.

    ::

        shake = ApiVersionsHandshake()
        while not shake.done:
            send(shake.request())             # a size-prefixed frame
            shake.receive(read_one_frame())   # size-prefixed too

    The first request goes out at ``max_version`` (kproto's highest by default)
    with ClientSoftwareName/Version; an UNSUPPORTED_VERSION answer switches to
    :func:`retry_version` and asks again (KIP-511).
    """

    def __init__(self, *, client_id: str | None = "kproto",
                 client_software_name: str = DEFAULT_CLIENT_SOFTWARE_NAME,
                 client_software_version: str = DEFAULT_CLIENT_SOFTWARE_VERSION,
                 max_version: int | None = None, allow_invalid: bool = False,
                 first_correlation_id: int = 0) -> None:
        self.version = _API_VERSIONS_MAX if max_version is None else max_version
        if not 0 <= self.version <= _API_VERSIONS_MAX:
            raise ValueError(f"kproto speaks ApiVersions v0-{_API_VERSIONS_MAX}, not v{self.version}")
        self.client_id = client_id
        self.client_software_name = client_software_name
        self.client_software_version = client_software_version
        self.allow_invalid = allow_invalid
        self.attempts: list[int] = []
        self.result: HandshakeResult | None = None
        self._next_correlation_id = first_correlation_id
        self._pending: int | None = None
        # check the software fields up front rather than at the first send
        api_versions_request(self.version, client_software_name=client_software_name,
                             client_software_version=client_software_version, allow_invalid=allow_invalid)

    @property
    def done(self) -> bool:
        return self.result is not None

    def request(self) -> bytes:
        """The next request frame (size-prefixed), at :attr:`version`."""
        if self.done:
            raise ApiVersionsError("the handshake is already finished")
        self._pending = self._next_correlation_id
        self._next_correlation_id += 1
        self.attempts.append(self.version)
        return encode_api_versions_request(
            correlation_id=self._pending, version=self.version, client_id=self.client_id,
            client_software_name=self.client_software_name, client_software_version=self.client_software_version,
            allow_invalid=self.allow_invalid, size_prefixed=True)

    def receive(self, frame: bytes) -> bool:
        """Read the answer to the last request (a size-prefixed frame); True when done."""
        import kproto

        if self._pending is None:
            raise ApiVersionsError("no request is waiting for an answer")
        response = kproto.decode_response(frame, API_VERSIONS_KEY, self.version, size_prefixed=True)
        if response.correlation_id != self._pending:
            raise DecodeError(f"correlation id {response.correlation_id} answers no pending request "
                              f"(expected {self._pending})", 0, api_key=API_VERSIONS_KEY, api_version=self.version)
        self._pending = None
        body: Any = response.body
        code = body.error_code
        if code == 0:
            self.result = HandshakeResult(response.body, self.version, list(self.attempts))
            return True
        if code != UNSUPPORTED_VERSION:
            raise ApiVersionsError(f"ApiVersions v{self.version} failed: {error_name(code)} ({code})", code)
        if self.version == 0:
            raise ApiVersionsError("the broker refused even ApiVersions v0", code)
        self.version = retry_version(response, self.version)
        return False


def handshake(exchange: Callable[[bytes], bytes], **options: Any) -> HandshakeResult:
    """Run :class:`ApiVersionsHandshake` over ``exchange`` (request frame in, response
    frame out, both size-prefixed); ``options`` go to the handshake."""
    shake = ApiVersionsHandshake(**options)
    while not shake.done:
        shake.receive(exchange(shake.request()))
    assert shake.result is not None
    return shake.result


def socket_exchange(sock: socket.socket, *, max_frame_size: int = 64 * 1024 * 1024) -> Callable[[bytes], bytes]:
    """An ``exchange`` for :func:`handshake` over a connected socket: send one frame,
    return the next whole frame received (size-prefixed)."""
    from kproto.framing import FrameReader

    reader = FrameReader(max_frame_size)
    waiting: list[bytes] = []

    def exchange(frame: bytes) -> bytes:
        sock.sendall(frame)
        while not waiting:
            chunk = sock.recv(65536)
            if not chunk:
                raise DecodeError("the broker closed the connection before answering", reader.offset)
            waiting.extend(bytes(f) for f in reader.feed(chunk))
        payload = waiting.pop(0)
        return len(payload).to_bytes(4, "big") + payload

    return exchange
