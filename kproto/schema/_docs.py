"""Docstrings of the message classes, written from the schema's facts only.

A class's docstring says which API and direction it is, its versions (valid,
flexible, deprecated, unstable, the lowest a Kafka 4.x release defines), the
release each run of versions was taken from, and per field: its Kafka type, the
versions that carry it, where it may be null, its default and whether it is a
tagged field. Nothing here is Kafka's prose: every phrase is made from the facts.

Used twice, so the two never differ: lazily by the classes at run time (``help()``,
``__doc__``) and by ``tools/gen_stubs.py`` for the ``.pyi`` stubs editors read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from kproto.schema._lookup import request_name, spec
from kproto.schema._messages import ALIASES
from kproto.schema._shapes import (
    F_CHILDREN,
    F_DEFAULT,
    F_NAME,
    F_NULLABLE,
    F_STRUCT,
    F_TAG,
    F_TAGGED,
    F_TYPE,
    F_VERSIONS,
)

_KIND_WORDS = {
    "request": "request body",
    "response": "response body",
    "header": "frame header",
    "data": "data structure",
}


@dataclass
class FieldFacts:
    """One field of one struct, over every version of its message."""

    name: str
    kafka_type: str
    struct: str | None
    default: Any
    versions: set[int] = field(default_factory=set)
    nullable: set[int] = field(default_factory=set)
    tagged: set[int] = field(default_factory=set)
    tag: int | None = None


def _in(version: int, versions: tuple[int, int] | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def version_text(versions: set[int] | tuple[int, int] | None) -> str:
    """ "v3-13", "v0, v5-7", "v4"; "none" for no version."""
    if versions is None:
        return "none"
    if isinstance(versions, tuple):
        versions = set(range(versions[0], versions[1] + 1))
    if not versions:
        return "none"
    runs: list[tuple[int, int]] = []
    for v in sorted(versions):
        if runs and runs[-1][1] == v - 1:
            runs[-1] = (runs[-1][0], v)
        else:
            runs.append((v, v))
    return ", ".join(f"v{lo}" if lo == hi else f"v{lo}-{hi}" for lo, hi in runs)


@cache
def field_facts(canonical: str) -> dict[str | None, dict[str, FieldFacts]]:
    """Per struct (None = the message itself), its fields in class order, with the
    versions each is present, nullable and tagged in, walked version by version."""
    info = spec(canonical)
    structs: dict[str | None, dict[str, FieldFacts]] = {}
    # Class order: the newest layer first, as the classes take their fields.
    for layer in sorted(info["layers"], key=lambda layer: -layer[0][1]):
        _declare(structs, None, layer[2])
    flexible = info["flexible_versions"]
    for (lo, hi), _origin, fields in info["layers"]:
        for version in range(lo, hi + 1):
            _mark(structs, None, fields, version, _in(version, flexible))
    return structs


def _declare(structs: dict, struct: str | None, fields: tuple) -> None:
    bucket = structs.setdefault(struct, {})
    for f in fields:
        if f[F_NAME] not in bucket:
            bucket[f[F_NAME]] = FieldFacts(f[F_NAME], f[F_TYPE], f[F_STRUCT], f[F_DEFAULT], tag=f[F_TAG])
        if f[F_STRUCT] is not None:
            _declare(structs, f[F_STRUCT], f[F_CHILDREN])


def _mark(structs: dict, struct: str | None, fields: tuple, version: int, flexible: bool) -> None:
    for f in fields:
        if not _in(version, f[F_VERSIONS]):
            continue
        facts = structs[struct][f[F_NAME]]
        facts.versions.add(version)
        if _in(version, f[F_NULLABLE]):
            facts.nullable.add(version)
        if flexible and f[F_TAG] is not None and _in(version, f[F_TAGGED]):
            facts.tagged.add(version)
        if f[F_STRUCT] is not None:
            _mark(structs, f[F_STRUCT], f[F_CHILDREN], version, flexible)


def default_text(facts: FieldFacts) -> str:
    default = facts.default
    if facts.kafka_type.startswith("[]"):
        return "None" if default is None else "empty list"
    if facts.struct is not None:
        return "None" if default is None else f"a {facts.struct} of defaults"
    if facts.kafka_type == "uuid" and default == 0:
        return "the zero UUID"
    return repr(default)


def field_line(facts: FieldFacts) -> str:
    """The one-line description of a field: type, versions, null, tag, default."""
    parts = [f"Kafka type {facts.kafka_type}", f"in {version_text(facts.versions)}"]
    if facts.nullable:
        parts.append(f"nullable in {version_text(facts.nullable)}")
    if facts.tagged:
        parts.append(f"tagged field (tag {facts.tag}) in {version_text(facts.tagged)}")
    parts.append(f"default {default_text(facts)}")
    return "; ".join(parts) + "."


def _api_words(info: dict) -> str:
    """ "the Produce API (key 0)": the name of the API's request without "Request", as
    kproto.versions.api_name gives it (that module is a layer above this one)."""
    request = request_name(info["api_key"]) or f"UNKNOWN({info['api_key']})Request"
    return f"the {request.removesuffix('Request')} API (key {info['api_key']})"


def _origin_text(info: dict) -> str:
    runs = []
    for versions, origin, _fields in sorted(info["layers"], key=lambda layer: layer[0][0]):
        where = f"Kafka {origin}" if origin[0].isdigit() else origin
        runs.append(f"{version_text(versions)} from {where}")
    return "Definitions: " + ", ".join(runs) + "."


def _message_summary(canonical: str, info: dict) -> list[str]:
    kind = _KIND_WORDS.get(info["type"], info["type"])
    if info["type"] == "header":
        kind = f"header of every {canonical[: -len('Header')].lower()} frame"
    first = f"{canonical}: the {kind}" + (f" of {_api_words(info)}" if info["api_key"] is not None else "") + "."
    lines = [first, ""]
    facts = [f"Versions {version_text(info['valid_versions'])}"]
    if info["flexible_versions"] is not None:
        facts.append(
            f"flexible (compact strings and arrays, tagged fields) in "
            f"{version_text(_clip(info['flexible_versions'], info))}"
        )
    if info["deprecated_versions"] is not None:
        facts.append(f"deprecated in {version_text(_clip(info['deprecated_versions'], info))}")
    if info["unstable_versions"] is not None:
        facts.append(
            f"unstable (brokers advertise them only with unstable.api.versions.enable) in "
            f"{version_text(_clip(info['unstable_versions'], info))}"
        )
    if info["api_key"] is not None:
        lowest = info["min_version_4x"]
        facts.append("no Kafka 4.x release defines it" if lowest is None else f"Kafka 4.x defines v{lowest} and up")
    lines.append("; ".join(facts) + ".")
    lines.append(_origin_text(info))
    old = [o for o, n in ALIASES.items() if n == canonical]
    if old:
        lines.append(f"Also reachable under its former name {', '.join(old)}.")
    return lines


def _clip(versions: tuple[int, int], info: dict) -> tuple[int, int]:
    lo, hi = info["valid_versions"]
    return max(versions[0], lo), min(versions[1], hi)


def class_doc(canonical: str, struct: str | None = None, *, with_fields: bool = True) -> str:
    """The docstring of a message class (``struct`` None) or of one of its nested structs."""
    info = spec(canonical)
    structs = field_facts(canonical)
    if struct is None:
        lines = _message_summary(canonical, info)
        nested = [s for s in structs if s is not None]
        if nested:
            lines.append("Nested structs (attributes of this class): " + ", ".join(nested) + ".")
    else:
        present: set[int] = set()
        for fields in structs.values():
            for facts in fields.values():
                if facts.struct == struct:
                    present |= facts.versions
        lines = [f"{struct}: a struct inside {canonical}, present in {version_text(present)}.", ""]
        lines.append("Decode and encode it through its message, not on its own.")
    if with_fields:
        fields = structs[struct]
        lines += ["", "Fields (versions are the message's):"] if fields else ["", "No fields."]
        for facts in fields.values():
            lines.append(f"    {facts.name}: {field_line(facts)}")
    return "\n".join(lines)


class LazyDoc:
    """A class's ``__doc__``, written on first read (``type.__doc__`` calls ``__get__``),
    so building a class costs no text and importing kproto none at all."""

    __slots__ = ("canonical", "struct", "text")

    def __init__(self, canonical: str, struct: str | None) -> None:
        self.canonical = canonical
        self.struct = struct
        self.text: str | None = None

    def __get__(self, obj: object, owner: type | None = None) -> str:
        if self.text is None:
            self.text = class_doc(self.canonical, self.struct)
        return self.text
