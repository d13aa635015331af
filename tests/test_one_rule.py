"""One rule, one place (issue 20): each wire rule is written once for C and once for the twin.

Every rule below has a fingerprint, a line shape that only its definition has; the
test reads the hand-written sources of kproto/ (not spark/, whose readers are Arrow
columns, nor generated files) and fails when the fingerprint turns up anywhere but
the rule's one C place and its one twin. A second copy of a rule written in the same
style trips it; docs/architecture.md ("Where each rule lives") is the prose of this table.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WIRE_C = "kproto/_c/_wire.pxd"
WIRE_PY = "kproto/_py/wire.py"

#: rule -> (fingerprint, the files allowed to hold it)
RULES = {
    "header version of a request / response (flexible versions, KIP-511, ControlledShutdown v0)":
        (r"api_key == (7|18)\b|== 7 and \w*version == 0", {"kproto/schema/__init__.py"}),
    "varint: seven bits a byte, low first":
        (r"\(b & 0x7F\) << shift", {WIRE_C, WIRE_PY}),
    "varint: bits beyond 32 / 64 are malformed":
        (r"shift == last_shift", {WIRE_C, WIRE_PY}),
    "zigzag: the sign of varints and varlongs":
        (r"\(u >> 1\) \^", {WIRE_C, WIRE_PY}),
    "length prefix: -1 is null where nullable":
        (r"== -1 and nullable", {WIRE_C, WIRE_PY}),
    "tagged fields: tags strictly rising":
        (r"tag\s*<=\s*\S*previous", {WIRE_C, WIRE_PY}),
    "tagged fields: a count above the bytes left is a lie":
        (r"\bcount(\[0\])?\s*>\s*(<uint32_t>)?\(?(n|end|r\.end|x\.end|len\(p\))\s*-", {WIRE_C, WIRE_PY}),
    "request header: api key, api version, correlation id, then the client id at byte 8":
        (r"_REQUEST_FIXED\s*=|h\.correlation_id = <int32_t>wire_load_be32\(p \+ start \+ 4\)",
         {WIRE_C, WIRE_PY}),
    "request header: which part of it a status is about":
        (r"^\s*WIRE_PART_CLIENT_ID\s*=|^PART_FIXED, PART_CLIENT_ID", {WIRE_C, WIRE_PY}),
    "strict UTF-8 (C: kp_utf8.h, called through the wire layer only)":
        (r"kp_utf8_valid\(", {WIRE_C, "kproto/_c/kp_utf8.h"}),
}


def sources() -> dict[str, str]:
    found = {}
    for pattern in ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.h"):
        for path in (ROOT / "kproto").rglob(pattern):
            name = path.relative_to(ROOT).as_posix()
            if name.startswith("kproto/spark/") or name in {"kproto/schema/_messages.py", "kproto/messages.pyi"}:
                continue
            found[name] = path.read_text(encoding="utf-8")
    return found


def places(pattern: str, files: dict[str, str]) -> set[str]:
    regex = re.compile(pattern, re.MULTILINE)
    return {name for name, text in files.items() if regex.search(text)}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_is_written_in_its_one_place(rule):
    pattern, allowed = RULES[rule]
    found = places(pattern, sources())
    assert found - allowed == set(), f"{rule}: written again in {sorted(found - allowed)}"
    assert found == allowed, f"{rule}: the fingerprint no longer matches {sorted(allowed - found)}; update it"


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
    assert places(RULES["header version of a request / response (flexible versions, KIP-511, "
                        "ControlledShutdown v0)"][0], files) == {"copy.pxi"}
