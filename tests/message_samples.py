"""Seeded message objects from schema plans, weighted to edge values (for the Java oracle).

Hypothesis (tests/strategies.py) explores a few examples per version well; the
differential test against Kafka's Java codec wants hundreds per version, cheaply
and the same on every run, and leaning on the values codecs get wrong: the ends
of every integer range, -0.0 and the infinities, the zero and all-ones UUID,
strings and bytes whose length crosses a varint byte (127 / 128), multi-byte
UTF-8, nulls wherever a field is nullable, empty and large arrays, and unknown
tagged fields on every flexible struct. ``samples(plan, n, seed)`` gives ``n``
objects: first the all-defaults one, then all-empty (nulls, empty arrays and
strings), then all-largest, then random mixes.
"""

from __future__ import annotations

import functools
import math
import random
import struct
import uuid

from kproto.schema import (
    ARRAY,
    BOOL,
    BYTES,
    FLOAT64,
    INT8,
    INT16,
    INT32,
    INT64,
    RECORDS,
    STRING,
    STRUCT,
    UINT16,
    UINT32,
    UUID,
    StructPlan,
    spec,
)
from kproto.schema._shapes import F_CHILDREN, F_STRUCT, F_TAG

_RANGES = {
    INT8: (-(2**7), 2**7 - 1),
    INT16: (-(2**15), 2**15 - 1),
    INT32: (-(2**31), 2**31 - 1),
    INT64: (-(2**63), 2**63 - 1),
    UINT16: (0, 2**16 - 1),
    UINT32: (0, 2**32 - 1),
}
_FLOATS = (0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, 5e-324, 2.0**53 + 2, math.inf, -math.inf, math.nan)
_UUIDS = (uuid.UUID(int=0), uuid.UUID(int=1), uuid.UUID(int=2**128 - 1))
_STRINGS = ("", "a", "x" * 127, "y" * 128, "é" * 64, "ü€𝄞 mixed", "\x00nul", "t" * 300)
_BYTES = (b"", b"\x00", b"\xff" * 127, bytes(range(128)), b"\x80" * 300)
# Lengths of the "large" arrays: primitives, and structs (fewer when nested).
_LARGE_PRIMITIVE, _LARGE_STRUCT = 300, 40

EMPTY, LARGEST, RANDOM = "empty", "largest", "random"


def samples(plan: StructPlan, count: int, seed: int) -> list:
    """``count`` objects of ``plan``'s message at its version, the same for the same seed."""
    rng = random.Random(seed)
    out = [plan.cls()]
    for i in range(1, count):
        mode = EMPTY if i == 1 else LARGEST if i == 2 else RANDOM
        out.append(_struct(plan, rng, mode, 0))
    return out[:count]


def _struct(plan: StructPlan, rng: random.Random, mode: str, depth: int):
    fields = {op.name: _field(op, rng, mode, depth) for op in plan.fields + plan.tagged}
    if plan.flexible and mode == RANDOM and rng.random() < 0.2:
        fields["_unknown_tags"] = _unknown_tags(plan, rng)
    return plan.cls(**fields)


def _unknown_tags(plan: StructPlan, rng: random.Random) -> dict[int, bytes]:
    # Java rejects a tag that another version of the struct defines ("Tag 1 is not valid
    # for version 0"), also one only a newer release defines, and keeps 2**31 - 1 as its
    # writer's end mark. So: the gaps between the tags kproto knows for the struct (they
    # test the merge of known and unknown tags in order), and tags from 100 up, of every
    # varint length.
    taken = _defined_tags(plan.cls._message_name).get(plan.name, set())
    gaps = [t for t in range(max(taken, default=0)) if t not in taken]
    tags: dict[int, bytes] = {}
    for _ in range(rng.randint(1, 3)):
        tag = rng.choice(gaps + [100, 127, 128, 1000, 16384, 2**28, rng.randint(100, 20000)])
        tags[tag] = rng.choice((b"", b"\x01", rng.randbytes(rng.randint(0, 130))))
    return tags


@functools.cache
def _defined_tags(message: str) -> dict[str, set[int]]:
    """Struct name -> the tags its fields have in any version."""
    tags: dict[str, set[int]] = {}

    def walk(struct: str, fields: tuple) -> None:
        for f in fields:
            if f[F_TAG] is not None:
                tags.setdefault(struct, set()).add(f[F_TAG])
            if f[F_STRUCT] is not None:
                walk(f[F_STRUCT], f[F_CHILDREN])

    for _versions, _origin, fields in spec(message)["layers"]:
        walk(message, fields)
    return tags


def _field(op, rng: random.Random, mode: str, depth: int):
    if op.nullable and (mode == EMPTY or mode == RANDOM and rng.random() < 0.2):
        return None
    if op.kind == ARRAY:
        return _array(op, rng, mode, depth)
    if op.kind == STRUCT:
        return _struct(op.child, rng, mode, depth + 1)
    return _scalar(op.kind, rng, mode)


def _array(op, rng: random.Random, mode: str, depth: int) -> list:
    if mode == EMPTY:
        return []
    is_struct = op.elem_kind == STRUCT
    if mode == LARGEST:
        length = 2 if is_struct else _LARGE_PRIMITIVE
    else:
        roll = rng.random()
        large = (_LARGE_STRUCT >> (2 * depth)) if is_struct else _LARGE_PRIMITIVE
        length = 0 if roll < 0.25 else large if roll > 0.95 else rng.randint(1, 3)
        if is_struct and depth >= 3:
            length = min(length, 1)
    if is_struct:
        return [_struct(op.child, rng, mode, depth + 1) for _ in range(length)]
    return [_scalar(op.elem_kind, rng, mode) for _ in range(length)]


def _scalar(kind: int, rng: random.Random, mode: str):
    if kind in _RANGES:
        lo, hi = _RANGES[kind]
        if mode == EMPTY:
            return 0
        if mode == LARGEST:
            return hi
        return rng.choice((lo, hi, -1 if lo else 1, 0, rng.randint(lo, hi), rng.randint(lo, hi)))
    if kind == BOOL:
        return mode == LARGEST or mode == RANDOM and rng.random() < 0.5
    if kind == FLOAT64:
        if mode != RANDOM:
            return 0.0 if mode == EMPTY else 1e300
        if rng.random() < 0.5:
            return rng.choice(_FLOATS)
        value = struct.unpack("<d", rng.randbytes(8))[0]
        return math.nan if math.isnan(value) else value  # Java and Python share one NaN
    if kind == UUID:
        if mode != RANDOM:
            return _UUIDS[0] if mode == EMPTY else _UUIDS[2]
        return rng.choice(_UUIDS) if rng.random() < 0.3 else uuid.UUID(int=rng.getrandbits(128))
    if kind == STRING:
        if mode != RANDOM:
            return "" if mode == EMPTY else _STRINGS[-1]
        if rng.random() < 0.5:
            return rng.choice(_STRINGS)
        return "".join(
            chr(rng.choice((rng.randint(32, 126), rng.randint(0xA0, 0xD7FF)))) for _ in range(rng.randint(0, 20))
        )
    if kind in (BYTES, RECORDS):
        if mode != RANDOM:
            return b"" if mode == EMPTY else _BYTES[-1]
        return rng.choice(_BYTES) if rng.random() < 0.5 else rng.randbytes(rng.randint(0, 40))
    raise ValueError(f"no sample values for kind {kind}")
