"""Files a person can hold in mind (issue 20): no hand-written source file in kproto/
over 1,000 lines and no function over 150.

Generated files are exempt. The few files still too long are listed with what
splitting them takes; the test fails when one of them grows a new offender, when
a file not listed passes a limit, and when a listed file no longer needs its entry.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_FILE_LINES = 1000
MAX_FUNCTION_LINES = 150

GENERATED = {"kproto/schema/_messages.py", "kproto/_common/error_codes.py", "kproto/messages.pyi"}

#: Over MAX_FILE_LINES still, and why they are not split yet.
STILL_TOO_LONG: dict[str, str] = {}

# A def / cdef / cpdef function; not a `cdef class Name(Base):` (a class is no function).
_C_FUNCTION = re.compile(r"^(\s*)(?:async\s+def|def|cdef|cpdef)\s+(?!class\b)(?:inline\s+)?[^=:]*?\b(\w+)\s*\(")


def hand_written_sources() -> list[Path]:
    found = []
    for pattern in ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.h"):
        found += [p for p in (ROOT / "kproto").rglob(pattern)
                  if p.relative_to(ROOT).as_posix() not in GENERATED]
    return sorted(found)


def long_functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines) of every function over MAX_FUNCTION_LINES."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [(node.name, node.end_lineno - node.lineno + 1) for node in ast.walk(ast.parse(text))
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    # Cython: a function runs until the next statement indented no deeper than its def.
    lines = text.split("\n")
    out = []
    for i, line in enumerate(lines):
        match = _C_FUNCTION.match(line)
        if not match or line.rstrip().endswith(("noexcept nogil", "nogil", "noexcept")) and "(" not in line:
            continue
        indent = len(match.group(1))
        end = i + 1
        while end < len(lines):
            stripped = lines[end].strip()
            if stripped and not stripped.startswith("#") and len(lines[end]) - len(lines[end].lstrip()) <= indent \
                    and not stripped.startswith((")", "]", '"""')):
                break
            end += 1
        last = end - 1
        while last > i and not lines[last].strip():
            last -= 1
        if last - i + 1 > MAX_FUNCTION_LINES:
            out.append((match.group(2), last - i + 1))
    return out


def test_no_hand_written_file_is_too_long():
    too_long = {p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").split("\n"))
                for p in hand_written_sources()}
    too_long = {name: n for name, n in too_long.items() if n > MAX_FILE_LINES}
    assert set(too_long) - set(STILL_TOO_LONG) == set(), too_long
    assert set(STILL_TOO_LONG) - set(too_long) == set(), "split: remove it from STILL_TOO_LONG"


def test_no_function_is_too_long():
    found = {p.relative_to(ROOT).as_posix(): long_functions(p) for p in hand_written_sources()}
    assert {name: functions for name, functions in found.items() if functions} == {}


def test_the_checks_see_what_they_look_for(tmp_path):
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    for suffix, head in ((".py", "def long_one():"), (".pyx", "cdef int long_one(int a) except -1:")):
        path = tmp_path / f"m{suffix}"
        path.write_text(f"{head}\n{body}\n\n\ndef short():\n    return 1\n", encoding="utf-8")
        assert long_functions(path) == [("long_one", MAX_FUNCTION_LINES + 1)]
    # A long class with a base is no long function; its long method still is.
    path = tmp_path / "c.pyx"
    path.write_text("cdef class Derived(Base):\n    cdef int long_one(self) except -1:\n"
                    + body.replace("    ", "        ") + "\n", encoding="utf-8")
    assert long_functions(path) == [("long_one", MAX_FUNCTION_LINES + 1)]
