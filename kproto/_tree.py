"""A JSON value as indented ``name: value`` text: the ``--format tree`` of ``kproto dump`` and
``kproto decode``. Plain Python, so ``kproto decode`` runs without numpy or pyarrow."""

from __future__ import annotations

from typing import Any

__all__ = ["tree_of"]


def tree_of(value: Any, indent: str) -> list[str]:
    """A JSON value as indented ``name: value`` lines; list items start with ``- ``."""
    lines = []
    if isinstance(value, dict):
        for name, item in value.items():
            if isinstance(item, (dict, list)) and item and _inline(item) is None:
                lines.append(f"{indent}{name}:\n")
                lines.extend(tree_of(item, indent + "  "))
            else:
                lines.append(f"{indent}{name}: {_scalar(item)}\n")
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (dict, list)) and item and _inline(item) is None:
                nested = tree_of(item, indent + "  ")
                nested[0] = f"{indent}- {nested[0][len(indent) + 2 :]}"
                lines.extend(nested)
            else:
                lines.append(f"{indent}- {_scalar(item)}\n")
    else:
        lines.append(f"{indent}{_scalar(value)}\n")
    return lines


def _inline(value: dict | list) -> str | None:
    """A struct or list of scalars on one line (``{api_key: 0, max_version: 11}``, ``[1, 2]``), when short."""
    items = value.values() if isinstance(value, dict) else value
    if any(isinstance(v, (dict, list)) and v for v in items):
        return None
    if isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {_scalar(v)}" for k, v in value.items()) + "}"
    else:
        text = "[" + ", ".join(_scalar(v) for v in value) + "]"
    return text if len(text) <= 100 else None


def _scalar(value: Any) -> str:
    import json

    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return _inline(value) or "{}"
    if isinstance(value, list):
        return _inline(value) or "[]"
    return json.dumps(value)
