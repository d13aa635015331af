"""Negotiation: the versions a client and a broker, or every broker of a cluster (KIP-35),
both speak; :class:`ObsoleteBrokerVersion` when a required API has none (KIP-97); the
Kafka 4.x baseline (KIP-896) and which client features a broker or cluster can serve.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kproto.errors import KprotoError
from kproto.versions._tables import (
    _API_TABLE,
    Ranges,
    api_key_of,
    api_label,
    api_name,
    kproto_ranges,
    release_table,
)


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


def negotiate(
    client_ranges: RangesLike | None,
    broker_ranges: RangesLike,
    *,
    required: Iterable[int | str] | bool = (),
    kafka_4x_baseline: bool = False,
) -> dict[int, int]:
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


def check_features(
    features: Mapping[str, Iterable[tuple[int | str, int, int]]], brokers: RangesLike
) -> dict[str, FeatureCheck]:
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
