"""One rule, one place (issue 20): each wire rule is written once for C and once for the twin.

Every rule below has a fingerprint, a line shape that only its definition has; the
test reads the hand-written sources of kproto/ (not spark/, whose readers are Arrow
columns, nor generated files) and fails when the fingerprint turns up anywhere but
the rule's one C place and its one twin. A second copy of a rule written in the same
style trips it; docs/architecture.md ("Where each rule lives") is the prose of this table.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from kproto import schema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import gen_walkers  # noqa: E402  (tools/ is no package)

WIRE_C = "kproto/_c/_wire.pxd"
WIRE_PY = "kproto/_py/wire.py"

#: rule -> (fingerprint, the files allowed to hold it)
RULES = {
    "header version of a request / response (flexible versions, KIP-511, ControlledShutdown v0)": (
        r"api_key == (7|18)\b|== 7 and \w*version == 0|in (REQUEST_HEADER_V0|RESPONSE_HEADER_V0_APIS)\b",
        {"kproto/schema/__init__.py"},
    ),
    "varint: seven bits a byte, low first": (r"\(b & 0x7F\) << shift", {WIRE_C, WIRE_PY}),
    "varint: bits beyond 32 / 64 are malformed": (r"shift == last_shift", {WIRE_C, WIRE_PY}),
    "zigzag: the sign of varints and varlongs": (r"\(u >> 1\) \^", {WIRE_C, WIRE_PY}),
    "length prefix: -1 is null where nullable": (r"== -1 and nullable", {WIRE_C, WIRE_PY}),
    "tagged fields: tags strictly rising": (r"tag\s*<=\s*\S*previous", {WIRE_C, WIRE_PY}),
    "tagged fields: a count above the bytes left is a lie": (
        r"\bcount(\[0\])?\s*>\s*(<uint32_t>)?\(?(n|end|r\.end|x\.end|len\(p\))\s*-",
        {WIRE_C, WIRE_PY},
    ),
    "request header: api key, api version, correlation id, then the client id at byte 8": (
        r"_REQUEST_FIXED\s*=|h\.correlation_id = <int32_t>wire_load_be32\(p \+ start \+ 4\)",
        {WIRE_C, WIRE_PY},
    ),
    "request header: which part of it a status is about": (
        r"^\s*WIRE_PART_CLIENT_ID\s*=|^PART_FIXED, PART_CLIENT_ID",
        {WIRE_C, WIRE_PY},
    ),
    "strict UTF-8 (C: kp_utf8.h, called through the wire layer only)": (
        r"kp_utf8_valid\(",
        {WIRE_C, "kproto/_c/kp_utf8.h"},
    ),
}


def sources() -> dict[str, str]:
    found = {}
    for pattern in ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.h"):
        for path in (ROOT / "kproto").rglob(pattern):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith("kproto/analyze/spark/") or name in {
                "kproto/schema/_messages.py",
                "kproto/messages.pyi",
            }:
                continue
            found[name] = path.read_text(encoding="utf-8")
    return found


def places(pattern: str, files: dict[str, str]) -> set[str]:
    regex = re.compile(pattern, re.MULTILINE)
    return {name for name, text in files.items() if regex.search(text)}


def assert_one_place(rule: str, pattern: str, allowed: set[str], files: dict[str, str]) -> None:
    """The rule's fingerprint (``pattern``) is found in exactly the ``allowed`` files, no more, no fewer."""
    found = places(pattern, files)
    assert found - allowed == set(), f"{rule}: written again in {sorted(found - allowed)}"
    assert found == allowed, f"{rule}: the fingerprint no longer matches {sorted(allowed - found)}; update it"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_is_written_in_its_one_place(rule):
    assert_one_place(rule, *RULES[rule], sources())


def test_a_second_copy_would_be_found():
    # The fingerprints are not vacuous: the code each rule replaced matches them.
    old_batch_scan = "            if <int64_t>tag <= previous:\n"
    old_reader = "        if n == -1 and nullable:\n"
    old_capture = "        if api_key == 7 and version == 0:\n"
    old_json_walk = "        if count > <uint32_t>(x.end - x.p):\n"
    files = {"copy.pxi": old_batch_scan + old_reader + old_capture + old_json_walk}
    assert places(RULES["tagged fields: a count above the bytes left is a lie"][0], files) == {"copy.pxi"}
    assert places(RULES["tagged fields: tags strictly rising"][0], files) == {"copy.pxi"}
    assert places(RULES["length prefix: -1 is null where nullable"][0], files) == {"copy.pxi"}
    assert places(
        RULES["header version of a request / response (flexible versions, KIP-511, ControlledShutdown v0)"][0], files
    ) == {"copy.pxi"}


# ------------------------------------------------------------------ plan walkers
#: The hand-written functions that branch on a field's kind to read (or write) a value:
#: C's encoder and the twin's decoder (its encoder looks its integer kinds up in a table).
#: C's decode dispatch is written once, in the template kproto/_c/_kinds.pxi.in, and
#: rendered by tools/gen_walkers.py between marker lines of each walker's file
#: (GENERATED_DISPATCHERS): the codec's walk_value (sinks Build and Check, which raise)
#: and the JSON pass's jvalue (GIL-free, with the partition facts).
KIND_DISPATCHERS = {
    ("kproto/_c/_codec_encode.pxi", "write_value"),  # encode
    ("kproto/_py/codec.py", "_read_value"),  # the twin's decode
}
GENERATED_DISPATCHERS = {
    "codec": ("kproto/_c/_codec_walk.pxi", "walk_value"),  # decode: objects and validation only
    "json": ("kproto/_c/_batch_json_walk.pxi", "jvalue"),  # JSON text and partition facts
}
KIND_NAMES = (
    "BOOL",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "UINT16",
    "UINT32",
    "FLOAT64",
    "UUID",
    "STRING",
    "BYTES",
    "RECORDS",
    "STRUCT",
    "ARRAY",
)
FUNCTION_START = re.compile(r"^(?:cdef|cpdef|def)\s[^\n]*?(\w+)\(", re.MULTILINE)
KIND_TEST = re.compile(r"\bkind == (?:K_)?(" + "|".join(KIND_NAMES) + r")\b")


def kind_dispatchers(files: dict[str, str]) -> set[tuple[str, str]]:
    """(file, function) of every top-level function that tests a value's kind against
    the variable-length kinds and most of the others: a per-kind read or write."""
    found = set()
    for name, text in files.items():
        starts = list(FUNCTION_START.finditer(text))
        for i, start in enumerate(starts):
            body = text[start.start() : starts[i + 1].start() if i + 1 < len(starts) else len(text)]
            kinds = set(KIND_TEST.findall(body))
            if {"STRING", "STRUCT", "ARRAY"} <= kinds and len(kinds) >= 10:
                found.add((name, start.group(1)))
    return found


def hand_written(files: dict[str, str]) -> dict[str, str]:
    """The files with their generated regions left out."""
    return {name: gen_walkers.without_regions(text) for name, text in files.items()}


def test_field_kinds_are_dispatched_once_per_direction_and_implementation():
    assert kind_dispatchers(hand_written(sources())) == KIND_DISPATCHERS


def test_the_c_decode_dispatch_is_generated_from_one_template():
    assert gen_walkers.stale() == [], "run python tools/gen_walkers.py"
    files = sources()
    for walker, (path, function) in GENERATED_DISPATCHERS.items():
        assert gen_walkers.OUTPUTS[walker] == ROOT / path
        assert kind_dispatchers({path: gen_walkers.regions(files[path])[walker]}) == {(path, function)}
        assert kind_dispatchers({path: files[path]}) == {(path, function)}
    # The rendered regions are the only generated code: no other file has one.
    holders = {name for name, text in files.items() if gen_walkers.regions(text)}
    assert holders == {path.relative_to(ROOT).as_posix() for path in gen_walkers.OUTPUTS.values()}


@pytest.mark.parametrize("walker", sorted(GENERATED_DISPATCHERS))
def test_every_schema_kind_reaches_every_walker(walker):
    # A kind the schema knows and the template does not would be an "unknown kind" at run time.
    text = gen_walkers.render(walker)
    missing = [name for name in schema.KIND_NAMES.values() if f"    if kind == K_{name.upper()}:" not in text]
    assert missing == []


def test_a_stale_walker_region_would_be_found():
    template = gen_walkers.TEMPLATE.read_text(encoding="utf-8")
    changed = template.replace('fixed("K_INT8", 1,', 'fixed("K_INT8", 2,')
    assert changed != template
    assert sorted(gen_walkers.stale(changed)) == sorted(gen_walkers.OUTPUTS.values())
    # ... and a region edited by hand.
    text = gen_walkers.OUTPUTS["json"].read_text(encoding="utf-8")
    edited = gen_walkers.spliced(text, "json", gen_walkers.render("json").replace("K_INT8", "K_INT16"))
    assert gen_walkers.regions(edited)["json"] != gen_walkers.render("json")


def test_a_second_kind_dispatch_would_be_found():
    # The eager read and the validating scan before they were folded: two dispatchers.
    kinds = ["STRING", "STRUCT", "ARRAY", "INT8", "INT16", "INT32", "INT64", "BOOL", "UUID", "BYTES"]
    branches = "".join(f"    if kind == K_{k}:\n        pass\n" for k in kinds)
    files = {
        "copy.pxi": f"cdef object read_value(ByteReader *r, int kind):\n{branches}\n"
        f"cdef int skip_value(ByteReader *r, int kind) except -1:\n{branches}"
    }
    assert kind_dispatchers(files) == {("copy.pxi", "read_value"), ("copy.pxi", "skip_value")}
    # ... and so would a walker written by hand again (the JSON pass before the template):
    # outside the marker lines, a rendering counts as hand-written.
    copied = {"copy.pxi": gen_walkers.render("json")}
    assert kind_dispatchers(hand_written(copied)) == {("copy.pxi", "jvalue")}
