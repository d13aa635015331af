#!/usr/bin/env python3
"""Check the ``kproto/_c/*.pyi`` stubs against the compiled modules and their pure twins.

mypy trusts the stubs: nothing else tells it what the compiled modules hold. Run
this after changing a ``.pyx`` (the extension must be built in place):

    python setup.py build_ext --inplace && python tools/check_stubs.py

Two checks:

1. ``mypy.stubtest`` compares each stub with its compiled module: names, argument
   names, kinds and defaults. Cython's own machinery (``__pyx_capi__``, pickling
   helpers) is allowlisted below; cdef classes are disjoint bases, which the stubs
   leave unsaid (``--ignore-disjoint-bases``). Cython does not expose the
   signatures of special methods (``__init__`` of a cdef class reads
   ``*args, **kwargs``), so step 3 checks those against the twin.
2. Every public function and method the compiled module shares with its pure twin
   must take the same arguments (names, kinds, defaults), so the one stub types
   both. Names only the compiled module has are listed, not failed.
3. The constructors in the stubs (``__init__`` / ``__new__``) take the arguments of
   the twin's ``__init__`` (names, kinds, which have defaults); the twin may add
   optional ones after them (its Reader takes a start and an end), so every call the
   stub allows works on both.
"""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODULES = ("buffer", "codec", "records", "batch", "capture")

ALLOWLIST = r"""
# Cython machinery on every compiled module and cdef class.
kproto\._c\._\w+\.__pyx_capi__
kproto\._c\._\w+\.__test__
kproto\._c\._\w+\.(\w+\.)?__reduce_cython__
kproto\._c\._\w+\.(\w+\.)?__setstate_cython__
# cdef classes do not expose __init__'s signature (it reads *args, **kwargs): step 3 checks
# the stubs' constructors against the twin instead.
kproto\._c\._\w+\.\w+\.__init__
# Declared so mypy treats these as buffers; Python < 3.12 has no __buffer__ slot wrapper.
kproto\._c\._records\.Records\.__buffer__
kproto\._c\._batch\.CBuffer\.__buffer__
"""


def run_stubtest() -> int:
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as allowlist:
        allowlist.write(ALLOWLIST)
    command = [
        sys.executable,
        "-m",
        "mypy.stubtest",
        "--mypy-config-file",
        str(ROOT / "pyproject.toml"),
        "--ignore-disjoint-bases",
        "--ignore-unused-allowlist",
        "--allowlist",
        allowlist.name,
        *(f"kproto._c._{name}" for name in MODULES),
    ]
    try:
        return subprocess.call(command, cwd=ROOT)
    finally:
        Path(allowlist.name).unlink()


def _parameters(function: Any, method: bool) -> list[tuple[str, Any, Any]] | None:
    """(name, kind, default) of each parameter (after self for a method), or None when not introspectable."""
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return None
    parameters = list(signature.parameters.values())
    if method and not isinstance(function, staticmethod):
        parameters = parameters[1:]  # self, whatever its name (a shared helper may call it "header")
    if [p.kind for p in parameters] == [inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD]:
        return None  # a Cython special method: its real signature is not exposed
    return [(p.name, p.kind, p.default) for p in parameters]


def _compare(what: str, compiled: Any, twin: Any, method: bool, problems: list[str]) -> None:
    c_params, py_params = _parameters(compiled, method), _parameters(twin, method)
    if c_params is not None and py_params is not None and c_params != py_params:
        problems.append(f"{what}: compiled {inspect.signature(compiled)}, twin {inspect.signature(twin)}")


def compare_twins() -> int:
    from kproto import _impl

    problems: list[str] = []
    for name in MODULES:
        compiled, twin = _impl.load(name, "c"), _impl.load(name, "py")
        only_compiled = []
        for attr, value in vars(compiled).items():
            if attr.startswith("_") or isinstance(value, types.ModuleType):
                continue
            if not hasattr(twin, attr):
                only_compiled.append(attr)
                continue
            other = getattr(twin, attr)
            if value is other:
                continue
            if isinstance(value, type):
                for method, function in vars(value).items():
                    if method.startswith("_") and method != "__init__":
                        continue
                    twin_function = inspect.getattr_static(other, method, None)
                    if twin_function is not None and (callable(function) or isinstance(function, staticmethod)):
                        _compare(f"{name}.{attr}.{method}", function, twin_function, True, problems)
            elif callable(value):
                _compare(f"{name}.{attr}", value, other, False, problems)
        if only_compiled:
            print(f"kproto._c._{name} only: {', '.join(sorted(only_compiled))}")
    for problem in problems:
        print(f"error: {problem}")
    return 1 if problems else 0


_KINDS = {
    "posonlyargs": inspect.Parameter.POSITIONAL_ONLY,
    "args": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "kwonlyargs": inspect.Parameter.KEYWORD_ONLY,
}


def _stub_constructor(function: ast.FunctionDef) -> list[tuple[str, Any, bool]]:
    """(name, kind, has a default) of a stub's __init__ / __new__ parameters after self / cls."""
    args = function.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [False] * (len(positional) - len(args.defaults)) + [True] * len(args.defaults)
    out = [
        (a.arg, _KINDS["posonlyargs" if a in args.posonlyargs else "args"], d) for a, d in zip(positional, defaults)
    ][1:]
    if args.vararg:
        out.append((args.vararg.arg, inspect.Parameter.VAR_POSITIONAL, False))
    out += [(a.arg, _KINDS["kwonlyargs"], d is not None) for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append((args.kwarg.arg, inspect.Parameter.VAR_KEYWORD, False))
    return out


def compare_constructors() -> int:
    from kproto import _impl

    problems = []
    for name in MODULES:
        twin = _impl.load(name, "py")
        tree = ast.parse((ROOT / "kproto" / "_c" / f"_{name}.pyi").read_text(encoding="utf-8"))
        for node in tree.body:
            if not isinstance(node, ast.ClassDef) or not hasattr(twin, node.name):
                continue
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name in ("__init__", "__new__"):
                    init = inspect.signature(getattr(twin, node.name).__init__)
                    expected = [(p.name, p.kind, p.default is not p.empty) for p in list(init.parameters.values())[1:]]
                    stub = _stub_constructor(item)
                    extra = expected[len(stub) :]
                    if expected[: len(stub)] != stub or not all(has_default for _, _, has_default in extra):
                        problems.append(f"{name}.{node.name}.{item.name}: stub and twin {init} differ")
    for problem in problems:
        print(f"error: {problem}")
    return 1 if problems else 0


def main() -> int:
    status = run_stubtest()
    return compare_twins() or compare_constructors() or status


if __name__ == "__main__":
    sys.exit(main())
