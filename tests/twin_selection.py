"""Which test modules the pure-Python pass of scripts/test.sh runs (the ``twin`` marker).

scripts/test.sh runs the whole suite on the Cython extension (tests that take the ``impl``
fixture run there on both implementations), then, with KPROTO_NO_EXTENSIONS=1, only the test
modules where the active implementation can change the result. That choice is made here,
from the test module's own imports, so a new test module is never left out by omission:

* a kproto module is *implementation-dependent* when it chooses an implementation
  (calls ``_impl.load``, or imports ``kproto._impl``, ``kproto._c`` or ``kproto._py``) or
  imports, at module level, a module that is;
* a kproto module is *application* when it is in ``kproto.analyze.spark`` or imports, at module level,
  a module that is: the Spark job, its CLI and report run once, on the extension; what they
  decode with is proved on both implementations by the tests of the layers below them;
* a test module is a *twin* module when it imports an implementation-dependent module
  (anywhere: a test's own import counts) and, at module level, no application module.

tests/project/test_implementation.py checks this rule on modules whose answer is known.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import kproto
from kproto import _impl

# The kproto under test: the checkout's, or an installed wheel's (cibuildwheel, ci.yml).
PACKAGE_PARENT = Path(kproto.__file__).resolve().parent.parent
CHOOSERS = ("kproto._impl", "kproto._c", "kproto._py")
APPLICATION_ROOT = "kproto.analyze.spark"


def module_imports(source: str, package: str = "", anywhere: bool = False) -> set[str]:
    """kproto modules imported at module level (or anywhere, inside functions too):
    ``from kproto import x`` counts as kproto.x when x is a module, else as kproto."""
    found: set[str] = set()
    tree = ast.parse(source)
    statements = ast.walk(tree) if anywhere else (s for node in tree.body for s in _top_level(node))
    for stmt in statements:
        if isinstance(stmt, ast.Import):
            found |= {alias.name for alias in stmt.names if alias.name.split(".")[0] == "kproto"}
        elif isinstance(stmt, ast.ImportFrom):
            base = _absolute(stmt, package)
            if base.split(".")[0] != "kproto":
                continue
            for alias in stmt.names:
                child = f"{base}.{alias.name}"
                found.add(child if _module_path(child) else base)
    return found


def _top_level(node: ast.stmt):
    """The statement, or those of a module-level ``try`` / ``if`` (an optional import)."""
    if isinstance(node, (ast.Try, ast.If)):
        for block in (node.body, getattr(node, "orelse", []), *(h.body for h in getattr(node, "handlers", []))):
            for inner in block:
                yield from _top_level(inner)
    else:
        yield node


def _absolute(stmt: ast.ImportFrom, package: str) -> str:
    if not stmt.level:
        return stmt.module or ""
    parts = package.split(".")[: len(package.split(".")) - stmt.level + 1]
    return ".".join(parts + ([stmt.module] if stmt.module else []))


def _module_path(name: str) -> Path | None:
    relative = Path(*name.split("."))
    for candidate in (PACKAGE_PARENT / relative.with_suffix(".py"), PACKAGE_PARENT / relative / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def _kproto_imports(name: str) -> frozenset[str]:
    path = _module_path(name)
    if path is None:
        return frozenset()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    return frozenset(module_imports(path.read_text(encoding="utf-8"), package))


def _reaches(name: str, is_target, seen: set[str] | None = None) -> bool:
    seen = set() if seen is None else seen
    if name in seen:
        return False
    seen.add(name)
    if is_target(name):
        return True
    return any(_reaches(other, is_target, seen) for other in _kproto_imports(name))


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def _chooses(name: str) -> bool:
    if any(_within(name, chooser) for chooser in CHOOSERS):
        return True
    path = _module_path(name)
    return path is not None and "_impl.load(" in path.read_text(encoding="utf-8")


@functools.cache
def implementation_dependent(name: str) -> bool:
    return _reaches(name, _chooses)


@functools.cache
def application(name: str) -> bool:
    return _reaches(name, lambda other: _within(other, APPLICATION_ROOT))


def is_twin_module(source: str) -> bool:
    """True when a test module with this source runs in the pure-Python pass too: it imports an
    implementation-dependent module (anywhere, a test's own import too) and, at module level
    (what the module is about), no application module."""
    return any(implementation_dependent(name) for name in module_imports(source, anywhere=True)) and not any(
        application(name) for name in module_imports(source)
    )


def implementations() -> tuple[str, ...]:
    """The implementations a test runs side by side: every one importable here, or the one
    ``KPROTO_TEST_IMPLEMENTATION`` names (``make quicktest``: ``c``, the codec's tests once).
    A name that is not importable is an error, never a silent fallback to the other."""
    available = _impl.available()
    chosen = os.environ.get("KPROTO_TEST_IMPLEMENTATION")
    if not chosen:
        return available
    if chosen not in available:
        raise RuntimeError(f"KPROTO_TEST_IMPLEMENTATION={chosen}: not importable here (only {', '.join(available)})")
    return (chosen,)
