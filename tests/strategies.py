"""Hypothesis strategies that build random valid message objects from schema plans."""

from __future__ import annotations

from hypothesis import strategies as st

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
)

_INTS = {INT8: 8, INT16: 16, INT32: 32, INT64: 64}
_SCALARS = {
    BOOL: st.booleans(),
    UINT16: st.integers(0, 2**16 - 1),
    UINT32: st.integers(0, 2**32 - 1),
    FLOAT64: st.floats(allow_nan=False),
    UUID: st.uuids(),
    STRING: st.text(max_size=12),
    BYTES: st.binary(max_size=12),
    RECORDS: st.binary(max_size=24),
}


def _value(op, kind: int, nullable: bool, unknown_tags: bool, depth: int):
    if kind in _INTS:
        bits = _INTS[kind]
        strategy = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif kind == ARRAY:
        strategy = st.lists(_value(op, op.elem_kind, False, unknown_tags, depth), max_size=3 if depth < 2 else 1)
    elif kind == STRUCT:
        strategy = struct_strategy(op.child, unknown_tags, depth + 1)
    else:
        strategy = _SCALARS[kind]
    return st.none() | strategy if nullable else strategy


def unknown_tag_strategy(plan: StructPlan):
    known = set(plan.tag_map)
    tags = st.integers(0, 5000).filter(lambda t: t not in known)
    return st.none() | st.dictionaries(tags, st.binary(max_size=6), min_size=1, max_size=2)


def struct_strategy(plan: StructPlan, unknown_tags: bool = False, depth: int = 0):
    fields = {op.name: _value(op, op.kind, op.nullable, unknown_tags, depth) for op in plan.fields + plan.tagged}
    if unknown_tags and plan.flexible:
        fields["_unknown_tags"] = unknown_tag_strategy(plan)
    return st.builds(plan.cls, **fields)
