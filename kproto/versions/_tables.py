"""The tables everything else in :mod:`kproto.versions` reads: what each broker release
advertises, and every API kproto has a schema for (its versions, KIP-896 deprecations and
what Kafka 4.x removed).

Derived at import time from the generated protocol facts (``MESSAGES``,
``BROKER_API_VERSIONS``) and the answers of real brokers in :mod:`kproto.broker_recordings`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kproto._common.api_keys import ApiKey
from kproto.broker_recordings import API_VERSIONS as _RECORDED_API_VERSIONS
from kproto.broker_recordings import RECORDED_FROM
from kproto.schema._lookup import MESSAGES, REQUESTS, api_key_of
from kproto.schema._messages import BROKER_API_VERSIONS

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
_ZOOKEEPER_API_KEY = ApiKey.LEADER_AND_ISR  # only ZooKeeper-mode brokers advertise it


def _build_zookeeper_mode_tables() -> dict[str, Ranges]:
    """Reference tables replaced by a recording of a KRaft broker but read off a ZooKeeper-mode
    broker (they advertise LeaderAndIsr): 3.9. Kept so that such a broker is still named."""
    tables: dict[str, Ranges] = {}
    for release, api_key, lo, hi in BROKER_API_VERSIONS:
        if release in RECORDED_FROM:
            tables.setdefault(release, {})[api_key] = (lo, hi)
    return {r: t for r, t in tables.items() if _ZOOKEEPER_API_KEY in t and _ZOOKEEPER_API_KEY not in _RELEASE_TABLES[r]}


_ZOOKEEPER_MODE_TABLES = _build_zookeeper_mode_tables()


def zookeeper_mode_table(release: str) -> Ranges | None:
    """What a ZooKeeper-mode broker of this release advertises, for a release whose table
    (:func:`release_table`) was recorded from a KRaft broker (3.9: the last release with both
    modes); None for the others, whose one table is their only mode's."""
    table = _ZOOKEEPER_MODE_TABLES.get(resolve_release(release))
    return None if table is None else dict(table)


_KRAFT_API_KEY = ApiKey.DESCRIBE_QUORUM  # only KRaft brokers advertise it


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
    prefixes = [r for r in RELEASES if wanted[: len(_release_key(r))] == _release_key(r)]
    if prefixes:
        return max(prefixes, key=lambda r: len(_release_key(r)))
    extensions = [r for r in RELEASES if _release_key(r)[: len(wanted)] == wanted]
    if extensions:
        raise ValueError(f"{text} is ambiguous: it could be {', '.join(extensions)}")
    raise ValueError(f"no broker release {text} in the table (known: {RELEASES[0]} to {RELEASES[-1]})")


def release_table(release: str) -> Ranges:
    """What a broker of this release advertises: ``{api_key: (min, max)}`` (a copy)."""
    return dict(_RELEASE_TABLES[resolve_release(release)])


def releases_between(first: str, last: str) -> tuple[str, ...]:
    """The table releases from ``first`` to ``last`` inclusive, oldest first."""
    lo, hi = sorted((RELEASES.index(resolve_release(first)), RELEASES.index(resolve_release(last))))
    return RELEASES[lo : hi + 1]


# ====================================================================== the API table
def _request_specs() -> dict[int, tuple[str, dict]]:
    return {key: (name[: -len("Request")], MESSAGES[name]) for key, name in sorted(REQUESTS.items())}


_REQUESTS = _request_specs()

#: API keys that broker releases advertise but kproto has no definition for (4.2+:
#: streams groups, share-group offsets): known to exist, decoded header only.
KNOWN_UNKNOWN_API_KEYS: frozenset[int] = frozenset(
    key for table in _RELEASE_TABLES.values() for key in table if key not in _REQUESTS
)


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
            api_key=api_key,
            name=name,
            min_version=lo,
            max_version=hi,
            flexible_from=flexible[0] if flexible else None,
            deprecated=info["deprecated_versions"],
            removed_in_4x=removed,
            removed_source=source,
            listeners=tuple(info["listeners"] or ()),
            latest_version_unstable=bool(info["latest_version_unstable"]),
        )
    return table


_API_TABLE = _build_api_table()


def api_table() -> list[ApiInfo]:
    """Every API kproto has a schema for, by API key."""
    return list(_API_TABLE.values())


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
