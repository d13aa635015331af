"""API versions: the API table, changes between Kafka releases, and a broker's ApiVersionsResponse.

    kproto versions                           every API kproto knows, with the 4.x baseline
    kproto versions --api Produce             each version of one API: releases, deprecation, removal
    kproto versions --release 3.9             what a 3.9 broker advertises
    kproto versions --release 3.6 --release 4.0
                                              APIs and versions gained and lost from 3.6 to 4.0
    kproto versions --response FILE           a captured ApiVersionsResponse frame (binary or hex):
                                              the broker's listing, its release, what kproto negotiates

Exit status: 0 when done; 2 for usage errors (an unknown API or release, a
response that cannot be read).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

from kproto._common.api_keys import ApiKey

HELP = "API versions: the table, changes between Kafka releases, a broker's ApiVersionsResponse"

_TEXT_SEPARATORS = str.maketrans("", "", " \t\r\n:,")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--release",
        action="append",
        metavar="VERSION",
        help="a Kafka release (3.9, 3.6.1, 0.10.2.1...); once: its table; "
        "twice or more: the changes from each to the next",
    )
    parser.add_argument(
        "--api", action="append", metavar="API", help="an API name or key: one line per version (repeatable)"
    )
    parser.add_argument(
        "--response",
        metavar="FILE",
        type=Path,
        help="an ApiVersionsResponse frame, raw bytes or hex text, with or without its size prefix",
    )
    parser.add_argument(
        "--response-version",
        type=int,
        metavar="N",
        help="the ApiVersions version the response answers (default: found from the bytes)",
    )


def run(args: argparse.Namespace) -> int:
    try:
        if args.response is not None:
            lines = response_report(_read_frame(args.response), args.response_version)
        elif args.release:
            lines = release_report(args.release)
        elif args.api:
            lines = [line for api in args.api for line in api_versions_report(api)]
        else:
            lines = api_table_report()
    except (ValueError, KeyError, OSError) as exc:  # bad input (DecodeError is a ValueError): exit 2
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"kproto versions: {message}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


# ---------------------------------------------------------------- the API table
def _range(versions: tuple[int, int] | None) -> str:
    if versions is None:
        return "-"
    lo, hi = versions
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _removed_cell(info) -> str:
    if info.removed_source == "unknown":
        return "?"
    if info.removed_in_4x is None:
        return "-"
    if info.removed_in_4x == info.versions:
        return "all"
    return _range(info.removed_in_4x)


def _table(rows: Sequence[tuple[str, ...]], right_aligned: Iterable[int] = ()) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    right = set(right_aligned)
    return [
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths))
        ).rstrip()
        for row in rows
    ]


def api_table_report() -> list[str]:
    """Every API kproto knows, with the KIP-896 deprecations and the 4.x removals."""
    from kproto import versions as v

    rows = [("key", "name", "versions", "flexible", "deprecated", "removed in 4.x", "listeners")]
    for info in v.api_table():
        removed = _removed_cell(info)
        if info.removed_in_4x is not None:  # say where a removal comes from when it is not the definitions
            removed += {"ZooKeeper-only": " (ZooKeeper)", "4.x broker tables": " (tables)"}.get(info.removed_source, "")
        name = info.name + (" *" if info.latest_version_unstable else "")
        rows.append(
            (
                str(info.api_key),
                name,
                _range(info.versions),
                f"{info.flexible_from}+" if info.flexible_from is not None else "-",
                _range(info.deprecated),
                removed,
                ",".join(info.listeners) or "-",
            )
        )
    unknown = ", ".join(str(k) for k in sorted(v.KNOWN_UNKNOWN_API_KEYS))
    rejected = sorted(
        {r for r, apis in v.ADVERTISED_BUT_REJECTED.items() if ApiKey.PRODUCE in apis}, key=v.RELEASES.index
    )
    return (
        _table(rows, right_aligned=(0,))
        + [
            "",
            f"{len(rows) - 1} APIs. deprecated: versions KIP-896 marked for removal in Kafka 4.0.",
            "removed in 4.x: versions below the lowest one the 4.x definitions keep; (ZooKeeper): an API of",
            "  ZooKeeper mode, gone with it; (tables): no 4.x definition, taken from what 4.x brokers advertise;",
            "  ?: unknown (controller-only APIs, which brokers do not advertise).",
            f"Produce v0-2 are removed yet {v.format_releases(rejected)} still advertise them (KAFKA-18659).",
            "* the latest version is unstable (not enabled on production brokers).",
        ]
        + (
            [f"API keys {unknown} appear in broker releases without a definition here (known-unknown)."]
            if unknown
            else []
        )
    )


def api_versions_report(api: str) -> list[str]:
    """One line per version of one API."""
    from kproto import versions as v

    info = v.api_info(api)
    lines = [f"{info.name}({info.api_key}): kproto v{info.min_version}-{info.max_version}"]
    for version in range(info.min_version, info.max_version + 1):
        facts = v.version_info(info.api_key, version)
        parts = [f"releases {v.format_releases(facts.releases)}"]
        if facts.flexible:
            parts.append("flexible")
        if facts.deprecated:
            parts.append("deprecated (KIP-896)")
        if facts.removed_in_4x:
            parts.append("removed in 4.x")
        elif facts.removed_in_4x is None:
            parts.append("4.x removal unknown")
        # the releases already show deprecation and gaps; keep the other notes
        parts.extend(n for n in facts.notes if not n.startswith(("deprecated by KIP-896", "not continuously")))
        lines.append(f"  v{version}: " + "; ".join(parts))
    return lines


# ---------------------------------------------------------------- releases
def _listing_entry(key: int, versions: tuple[int, int]) -> str:
    from kproto import versions as v

    lo, hi = versions
    return f"{v.api_label(key)}: " + (str(lo) if lo == hi else f"{lo} to {hi}")


def release_report(releases: list[str]) -> list[str]:
    """One release: its table; several: the changes from each to the next."""
    from kproto import versions as v

    resolved = [v.resolve_release(r) for r in releases]
    if len(resolved) == 1:
        table = v.release_table(resolved[0])
        return [f"Kafka {resolved[0]} advertises {len(table)} APIs:"] + [
            f"  {_listing_entry(k, table[k])}" for k in sorted(table)
        ]
    lines: list[str] = []
    for before, after in zip(resolved, resolved[1:]):
        changes = v.release_changes(before, after)
        if lines:
            lines.append("")
        lines.append(f"Kafka {before} -> {after}: {len(changes)} API(s) changed")
        lines += [f"  {c.describe()}" for c in changes]
        new_apis = sum(1 for c in changes if c.before is None)
        gone_apis = sum(1 for c in changes if c.after is None)
        gained = sum(len(c.gained) for c in changes if c.before is not None and c.after is not None)
        lost = sum(len(c.lost) for c in changes if c.before is not None and c.after is not None)
        lines.append(
            f"  summary: {new_apis} new API(s), {gone_apis} API(s) gone, "
            f"{gained} version(s) gained and {lost} lost in the others"
        )
        modes = (v.release_mode(before), v.release_mode(after))
        if modes[0] != modes[1]:
            lines.append(
                f"  note: the {before} table is a {modes[0]}-mode broker's and the {after} table a "
                f"{modes[1]}-mode broker's: the APIs of each mode show as gone or new"
            )
    return lines


# ---------------------------------------------------------------- a broker's response
def _read_frame(path: Path) -> bytes:
    """The bytes of a frame file: raw, or hex text (spaces, newlines, colons, 0x allowed)."""
    data = path.read_bytes()
    try:
        text = data.decode("ascii").translate(_TEXT_SEPARATORS).replace("0x", "")
    except UnicodeDecodeError:
        return data
    if text and len(text) % 2 == 0 and all(c in "0123456789abcdefABCDEF" for c in text):
        return bytes.fromhex(text)
    return data


def _strip_size_prefix(frame: bytes) -> bytes:
    if len(frame) >= 4 and int.from_bytes(frame[:4], "big", signed=True) == len(frame) - 4:
        return frame[4:]
    return frame


# Versions with distinct wire forms, newest first: v3-4 are identical, and so are v1-2.
_WIRE_FORMS = ((4, "v3-4 (flexible)"), (2, "v1-2"), (0, "v0"))


def decode_api_versions_response(frame: bytes, version: int | None = None):
    """``(response, form)``: the response decoded at ``version``, or at the first wire
    form that reads the whole frame when ``version`` is None."""
    import kproto

    payload = _strip_size_prefix(frame)
    if version is not None:
        response = kproto.decode_response(payload, ApiKey.API_VERSIONS, version)
        return response, f"v{response.api_version}"
    failures = []
    for attempt, form in _WIRE_FORMS:
        try:
            response = kproto.decode_response(payload, ApiKey.API_VERSIONS, attempt)
        except kproto.DecodeError as exc:
            failures.append(f"{form}: {exc}")
            continue
        if response.api_version != attempt:  # read as v0 (KIP-511 fallback): an UNSUPPORTED_VERSION answer
            form = "v0 (an UNSUPPORTED_VERSION answer)"
        return response, form
    raise ValueError("not an ApiVersionsResponse in any wire form:\n  " + "\n  ".join(failures))


def broker_listing(ranges: dict[int, tuple[int, int]]) -> list[str]:
    """The listing in the style of ``kafka-broker-versions.sh --listApiVersions``."""
    from kproto import versions as v

    mine = v.kproto_ranges()
    entries = []
    # like the Kafka tool, client-facing APIs the broker does not offer are listed as UNSUPPORTED
    client_facing = {info.api_key for info in v.api_table() if "broker" in info.listeners}
    for key in sorted(set(ranges) | client_facing):
        if key not in ranges:
            entries.append(f"{v.api_label(key)}: UNSUPPORTED")
            continue
        entry = _listing_entry(key, ranges[key])
        if key in mine:
            usable = v.usable_version(mine[key], ranges[key])
            if usable is not None:
                entry += f" [usable: {usable}]"
            elif ranges[key][0] > mine[key][1]:
                entry += " [unusable: node too new]"
            else:
                entry += " [unusable: node too old]"
        entries.append(entry)
    # one entry per line, comma-separated, inside "broker -> ( ... )" like the Kafka tool
    return ["broker -> ("] + [f"\t{e}," for e in entries[:-1]] + [f"\t{e}" for e in entries[-1:]] + [")"]


def response_report(frame: bytes, version: int | None = None) -> list[str]:
    """Listing, inferred release and negotiation for one ApiVersionsResponse frame."""
    from kproto import versions as v
    from kproto.errors import error_name

    response, form = decode_api_versions_response(frame, version)
    body = response.body
    ranges = v.as_ranges(body)
    lines = [
        f"ApiVersionsResponse read as {form}: error {error_name(body.error_code)}, "
        f"{len(ranges)} APIs, correlation id {response.correlation_id}"
    ]
    lines += broker_listing(ranges)

    match = v.infer_release(ranges)
    lines.append(f"Inferred release: {match.describe()}")
    for release in match.closest:
        lines += [f"  vs {release}: {d}" for d in match.differences[release]]

    negotiated = v.negotiate(None, ranges)
    lines.append(f"kproto would negotiate {len(negotiated)} APIs:")
    lines += [f"  {v.api_label(k)}: v{ver}" for k, ver in negotiated.items()]

    lines += _notes(ranges, negotiated, match)
    return lines


def _notes(ranges, negotiated, match) -> list[str]:
    from kproto import versions as v

    notes = []
    candidates = match.exact or match.closest
    looks_4x = bool(candidates) and all(r in v.ADVERTISED_BUT_REJECTED for r in candidates)
    for key, (lo, hi) in sorted(ranges.items()):
        info = _known_api(key)
        if info is None or info.removed_in_4x is None:
            continue
        gone_lo, gone_hi = max(lo, info.removed_in_4x[0]), min(hi, info.removed_in_4x[1])
        if gone_lo > gone_hi:
            continue
        span = f"{info.name} v{gone_lo}" + (f"-{gone_hi}" if gone_hi > gone_lo else "")
        if looks_4x:
            notes.append(
                f"{span}: advertised but rejected by 4.x brokers" + (" (KAFKA-18659)" if key == ApiKey.PRODUCE else "")
            )
        else:
            notes.append(f"{span}: served here, removed in Kafka 4.x")
    for key, version in negotiated.items():
        info = v.api_info(key)
        if info.deprecated and info.deprecated[0] <= version <= info.deprecated[1]:
            notes.append(f"{info.name} v{version} would be used: deprecated by KIP-896")
    unknown = sorted(k for k in ranges if _known_api(k) is None)
    if unknown:
        notes.append(
            "API keys without a kproto definition (header-only decoding): " + ", ".join(str(k) for k in unknown)
        )
    return (["Notes:"] + [f"  {n}" for n in notes]) if notes else []


def _known_api(key: int):
    from kproto import versions as v

    try:
        return v.api_info(key)
    except KeyError:
        return None
