"""Old names kept for one release after a rename: each use warns and names the new one.

docs/api.md lists them; they go in the release after the one that deprecated them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A DeprecationWarning for ``old``, pointing at the caller of the deprecated name."""
    warnings.warn(f"{old} is deprecated and will be removed in the next release; use {new}",
                  DeprecationWarning, stacklevel=stacklevel)


def module_getattr(module: str, aliases: dict[str, tuple[str, Any]]) -> Callable[[str], Any]:
    """A module-level ``__getattr__`` serving old names: ``{old: (new name, value)}``."""

    def __getattr__(name: str) -> Any:
        if name in aliases:
            new, value = aliases[name]
            warn(f"{module}.{name}", new)
            return value
        raise AttributeError(f"module {module!r} has no attribute {name!r}")

    return __getattr__
