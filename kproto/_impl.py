"""Which implementation runs: the Cython extension or its pure-Python twin.

Every hot module exists twice with the same public names:
``kproto/_c/_<name>.pyx`` (compiled) and ``kproto/_py/<name>.py`` (pure Python).
``KPROTO_NO_EXTENSIONS=1`` selects the twins. So does a package installed without
its extension on purpose (``KPROTO_NO_EXTENSIONS=1 pip install kproto``: setup.py
records that in ``kproto/_build_info.py``). Otherwise a missing or broken extension
falls back to the twins with a RuntimeWarning (never silently), and
:func:`kproto.extension_loaded` reports False.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

NO_EXTENSIONS = os.environ.get("KPROTO_NO_EXTENSIONS", "") not in ("", "0")


def _built_without_extension() -> bool:
    """True for a package built pure on purpose; a source tree has no _build_info and expects it."""
    try:
        info = importlib.import_module("kproto._build_info")
    except ImportError:
        return False
    return not getattr(info, "EXTENSION_BUILT", True)


#: Installed without the compiled extension, on purpose: the twins run and nothing warns.
PURE_INSTALL = _built_without_extension()

_extension_error: Exception | None = None
if NO_EXTENSIONS or PURE_INSTALL:
    USE_EXTENSION = False
else:
    try:
        importlib.import_module("kproto._c._buffer")
        USE_EXTENSION = True
    except ImportError as exc:  # not built (e.g. a source tree without build_ext)
        USE_EXTENSION = False
        _extension_error = exc
        warnings.warn(
            f"kproto: compiled extension not available ({exc}); using the pure-Python implementation",
            RuntimeWarning,
            stacklevel=2,
        )


def load(name: str, implementation: str | None = None) -> ModuleType:
    """The module implementing ``name``: ``"c"``, ``"py"``, or the active one when None."""
    if implementation is None:
        implementation = "c" if USE_EXTENSION else "py"
    if implementation == "c":
        return importlib.import_module(f"kproto._c._{name}")
    if implementation == "py":
        return importlib.import_module(f"kproto._py.{name}")
    raise ValueError(f"unknown implementation {implementation!r} (expected 'c' or 'py')")


def available() -> tuple[str, ...]:
    """Implementations importable in this process (the twin always is)."""
    if NO_EXTENSIONS or PURE_INSTALL:
        return ("py",)
    return ("c", "py") if USE_EXTENSION or _can_import_extension() else ("py",)


def _can_import_extension() -> bool:
    try:
        importlib.import_module("kproto._c._buffer")
        return True
    except ImportError:
        return False
