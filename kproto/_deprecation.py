"""Old names kept for one release after a rename: each use warns and names the new one.

docs/api.md lists them; they go in the release after the one that deprecated them.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
import warnings
from typing import Any


def warn(old: str, new: str, *, stacklevel: int = 3) -> None:
    """A DeprecationWarning for ``old``, pointing at the caller of the deprecated name."""
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release; use {new}",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


# ---------------------------------------------------------------- modules that moved
# The three layers (docs/architecture.md) gave these modules new homes in 0.x; the old paths
# import the new modules for one release, with a warning. Old path -> new path; a moved package
# carries its submodules (``kproto.spark.jobs`` -> ``kproto.analyze.spark.jobs``).
MOVED_MODULES: dict[str, str] = {
    "kproto.batch": "kproto.arrow.frames",
    "kproto.capture": "kproto.arrow.capture",
    "kproto.exchanges": "kproto.arrow.exchanges",
    "kproto.credentials": "kproto.arrow.credentials",
    "kproto.spark": "kproto.analyze.spark",
    "kproto.fingerprint": "kproto.analyze.fingerprint",
    "kproto.client_recordings": "kproto.analyze.client_recordings",
    "kproto.dump": "kproto.analyze.dump",
    "kproto.demo": "kproto.analyze.demo",
    "kproto.cli": "kproto.analyze.cli",
}

# Names an old path served that its new module does not: old module -> {name: its new dotted name}.
MOVED_NAMES: dict[str, dict[str, str]] = {
    "kproto.batch": {
        "pair": "kproto.arrow.exchanges.pair",
        "pair_schema": "kproto.arrow.exchanges.pair_schema",
        "pair_rows": "kproto.arrow.exchanges.pair_rows",
        "DEFAULT_MAX_FRAME_SIZE": "kproto.limits.DEFAULT_MAX_FRAME_SIZE",
        "topic_names": "kproto.arrow.topic_names.topic_names",
        "topic_names_schema": "kproto.arrow.topic_names.topic_names_schema",
        "topic_naming_versions": "kproto.arrow.topic_names.topic_naming_versions",
    },
    "kproto.capture": {"DEFAULT_MAX_FRAME_SIZE": "kproto.limits.DEFAULT_MAX_FRAME_SIZE"},
    "kproto.fingerprint": {
        name: f"kproto.analyze.fingerprint_scoring.{name}"
        for name in ("evaluate", "recorded_clients", "leave_one_out", "confusion_markdown")
    },
}


def new_path(old: str) -> str | None:
    """Where the module once imported as ``old`` lives now, or None if it did not move."""
    for prefix, target in MOVED_MODULES.items():
        if old == prefix or old.startswith(prefix + "."):
            return target + old[len(prefix) :]
    return None


class _OldPath(types.ModuleType):
    """The module at an old path: every attribute is read from the module at the new one."""

    def __getattr__(self, name: str) -> Any:
        extra = MOVED_NAMES.get(self.__name__, {})
        if name in extra:
            warn(f"{self.__name__}.{name}", extra[name])
            module, attribute = extra[name].rsplit(".", 1)
            return getattr(importlib.import_module(module), attribute)
        return getattr(importlib.import_module(self.__dict__["_kproto_new_path"]), name)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__dict__["_kproto_new_path"]))


class _OldPathFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves ``import kproto.batch`` and the other old paths of :data:`MOVED_MODULES`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        new = new_path(fullname)
        if new is None:
            return None
        new_spec = importlib.util.find_spec(new)
        if new_spec is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, self, is_package=new_spec.submodule_search_locations is not None
        )

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        new = new_path(spec.name)
        assert new is not None
        warn(spec.name, new)  # level 3: the import statement (warnings skips the import system)
        module = _OldPath(spec.name, f"deprecated: moved to {new}")
        module.__dict__["_kproto_new_path"] = new
        if spec.submodule_search_locations is not None:
            module.__path__ = []  # a package: its submodules come through this finder too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        importlib.import_module(module.__dict__["_kproto_new_path"])  # fail at the import, not later

    def get_code(self, fullname: str) -> Any:
        """``python -m kproto.cli`` (an old path) runs the new module's code."""
        new = new_path(fullname)
        assert new is not None
        warn(fullname, new)
        spec = importlib.util.find_spec(new)
        assert spec is not None and spec.loader is not None
        return spec.loader.get_code(new)  # type: ignore[attr-defined]


def install_old_paths() -> None:
    """Put the finder of old module paths on ``sys.meta_path`` (once; ``import kproto`` does it)."""
    if not any(isinstance(finder, _OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(_OldPathFinder())
