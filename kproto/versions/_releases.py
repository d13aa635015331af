"""What the release tables tell about a version or a response: which releases serve one
(API, version), which release an ApiVersionsResponse matches, and what changed between
two releases.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from kproto._common.api_keys import ApiKey
from kproto.versions._negotiate import RangesLike, _range_text, as_ranges
from kproto.versions._tables import (
    _API_TABLE,
    _RELEASE_TABLES,
    _RELEASES_4X,
    _ZOOKEEPER_MODE_TABLES,
    ADVERTISED_BUT_REJECTED,
    RECORDED_FROM,
    RELEASES,
    Ranges,
    _in,
    api_key_of,
    api_label,
    api_name,
    release_table,
)


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
        return VersionInfo(
            key,
            api_name(key),
            version,
            False,
            False,
            False,
            None,
            "unknown",
            served,
            rejected,
            ("kproto has no definition for this API",),
        )
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
    return VersionInfo(
        key,
        info.name,
        version,
        defined,
        _in(version, (info.flexible_from, 0x7FFF)) if info.flexible_from is not None else False,
        deprecated,
        removed,
        info.removed_source,
        served,
        rejected,
        tuple(notes),
    )


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
            return (
                f"{self.exact[0]} in {self.mode} mode (exact match with the table of a {self.mode}-mode "
                f"{self.exact[0]} broker; patch releases of a line are not told apart)"
            )
        if len(self.exact) == 1 and self.exact[0] in RECORDED_FROM:
            recorded = RECORDED_FROM[self.exact[0]]
            return (
                f"{self.exact[0]} (exact match with the answer of a real {recorded} broker; "
                f"patch releases that advertise the same versions are not told apart)"
            )
        if len(self.exact) == 1:
            return (
                f"{self.exact[0]} (exact match; patch releases of a line advertise the same "
                f"versions and are not told apart)"
            )
        if self.exact:
            return (
                f"ambiguous: {', '.join(self.exact)} advertise identical versions; "
                f"ApiVersions alone cannot tell them apart"
            )
        if not self.closest:
            return "unknown: no release to compare with"
        count = len(self.differences[self.closest[0]])
        which = " or ".join(self.closest)
        tie = " (a tie: cannot choose)" if len(self.closest) > 1 else ""
        return (
            f"no exact match; closest {which}{tie}, {count} API(s) differ: a patch or vendor build, "
            f"a broker with some APIs disabled or unstable ones enabled, or a release newer than the table"
        )


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
    return [
        ReleaseChange(key, api_name(key), old.get(key), new.get(key))
        for key in sorted(set(old) | set(new))
        if old.get(key) != new.get(key)
    ]
