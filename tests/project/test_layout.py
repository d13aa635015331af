"""Files a person can hold in mind (issue 39): no hand-written source file in kproto/
over 600 lines and no function over 100; every repeat of six or more lines of the same
shape known and listed (tools/duplicate_scan.py).

Generated files are exempt. The C hot loops and modules over a cap are allowed by name,
each with why; the test fails when a file or function not listed passes a cap, and when a
listed one no longer needs its entry.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import duplicate_scan  # noqa: E402  (tools/ is no package)

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100

GENERATED = duplicate_scan.GENERATED

_LAYOUT = (
    "the compiled layout of the codec's hot path: code moved into an included file of its own "
    "shifts the functions after it, which cost 10-12% on Fetch and Metadata decodes when the "
    "walker's dispatch was (docs/decisions/plan-walker.md); split only with bench_codec.py figures"
)

#: Modules over MAX_FILE_LINES, and why.
STILL_TOO_LONG: dict[str, str] = {
    "kproto/_c/_codec.pyx": "the plan compiler, the struct constructors and the helpers the walker inlines; " + _LAYOUT,
    "kproto/_c/_records.pyx": (
        "Record, Records and the batch base the included v2 / legacy / columnar parts build "
        "on (a cdef class must precede the parts that extend it); the record-set loops "
        "are hot (bench_records.py), split only with their figures"
    ),
}

_HOT = "a C hot loop, one pass over every frame / packet / record with its state in C locals; "

#: (module, function) over MAX_FUNCTION_LINES, and why.
LONG_FUNCTIONS: dict[tuple[str, str], str] = {
    ("kproto/_c/_batch.pyx", "scan"): _HOT + "the header pass over every frame, GIL released",
    ("kproto/_c/_batch_scan.pxi", "scan_plain_block"): _HOT + "the plain-request fast path of the header pass",
    ("kproto/_c/_capture_reader.pxi", "_packet"): _HOT + "a packet's link, IP and TCP layers",
    ("kproto/_c/_records_columns.pxi", "_columnar"): _HOT + "a record set to columns, record by record",
    ("kproto/_c/_capture_reassembly.pxi", "_segment"): _HOT + "a TCP segment into its connection's stream",
    ("kproto/_py/capture_reader.py", "_packet"): (
        "the twin of the C hot loop `_packet`, kept statement by statement beside it so the two read alike"
    ),
}

# A def / cdef / cpdef function; not a `cdef class Name(Base):` (a class is no function).
_C_FUNCTION = re.compile(r"^(\s*)(?:async\s+def|def|cdef|cpdef)\s+(?!class\b)(?:inline\s+)?[^=:]*?\b(\w+)\s*\(")


def hand_written_sources() -> list[Path]:
    found = []
    for pattern in ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.h"):
        found += [p for p in (ROOT / "kproto").rglob(pattern) if p.relative_to(ROOT).as_posix() not in GENERATED]
    return sorted(found)


def long_functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines) of every function over MAX_FUNCTION_LINES."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return [
            (node.name, node.end_lineno - node.lineno + 1)
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
        ]
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
            if (
                stripped
                and not stripped.startswith("#")
                and len(lines[end]) - len(lines[end].lstrip()) <= indent
                and not stripped.startswith((")", "]", '"""'))
            ):
                break
            end += 1
        last = end - 1
        while last > i and not lines[last].strip():
            last -= 1
        if last - i + 1 > MAX_FUNCTION_LINES:
            out.append((match.group(2), last - i + 1))
    return out


def test_no_hand_written_file_is_too_long():
    too_long = {
        p.relative_to(ROOT).as_posix(): len(p.read_text(encoding="utf-8").split("\n")) for p in hand_written_sources()
    }
    too_long = {name: n for name, n in too_long.items() if n > MAX_FILE_LINES}
    assert set(too_long) - set(STILL_TOO_LONG) == set(), too_long
    assert set(STILL_TOO_LONG) - set(too_long) == set(), "split: remove it from STILL_TOO_LONG"


def test_no_function_is_too_long():
    found = {(p.relative_to(ROOT).as_posix(), name): n for p in hand_written_sources() for name, n in long_functions(p)}
    assert set(found) - set(LONG_FUNCTIONS) == set(), found
    assert set(LONG_FUNCTIONS) - set(found) == set(), "shortened: remove it from LONG_FUNCTIONS"


def test_the_checks_see_what_they_look_for(tmp_path):
    body = "\n".join(f"    x = {i}" for i in range(MAX_FUNCTION_LINES))
    for suffix, head in ((".py", "def long_one():"), (".pyx", "cdef int long_one(int a) except -1:")):
        path = tmp_path / f"m{suffix}"
        path.write_text(f"{head}\n{body}\n\n\ndef short():\n    return 1\n", encoding="utf-8")
        assert long_functions(path) == [("long_one", MAX_FUNCTION_LINES + 1)]
    # A long class with a base is no long function; its long method still is.
    path = tmp_path / "c.pyx"
    path.write_text(
        "cdef class Derived(Base):\n    cdef int long_one(self) except -1:\n" + body.replace("    ", "        ") + "\n",
        encoding="utf-8",
    )
    assert long_functions(path) == [("long_one", MAX_FUNCTION_LINES + 1)]


def test_every_repeated_run_is_listed_with_its_reason():
    """The issue 20 figure: pairs of places sharing 6+ lines of the same shape are only the
    intentional ones (ALLOWED) and those still to fold (NOT_FOLDED_YET); a fold removes
    its entry."""
    found = set(duplicate_scan.scan(duplicate_scan.sources()))
    listed = set(duplicate_scan.ALLOWED) | set(duplicate_scan.NOT_FOLDED_YET)
    assert found - listed == set(), "a new repeat: fold it into one place, or list it with its reason"
    assert listed - found == set(), "folded: remove its entry from tools/duplicate_scan.py"
    assert not set(duplicate_scan.ALLOWED) & set(duplicate_scan.NOT_FOLDED_YET)


def test_the_duplicate_scan_sees_a_renamed_copy(tmp_path):
    package = tmp_path / "kproto"
    package.mkdir()
    logic = """def {name}(view, pos):
    if len(view) - pos < 4:
        raise ValueError(f"truncated at {{pos}}")
    value = int.from_bytes(view[pos:pos + 4], "big")
    if value > LIMIT:
        raise ValueError("too big")
    return value + pos * 2, view[pos + 4:]
"""
    (package / "a.py").write_text(logic.format(name="first"), encoding="utf-8")
    (package / "b.py").write_text(
        "# other names, same shape\n" + logic.format(name="second").replace("view", "data").replace("pos", "at"),
        encoding="utf-8",
    )
    (package / "c.py").write_text("X = 1\nY = 2\nZ = 3\nA = 4\nB = 5\nC = 6\nD = 7\n", encoding="utf-8")
    (package / "d.py").write_text("P = 1\nQ = 2\nR = 3\nS = 4\nT = 5\nU = 6\nV = 7\n", encoding="utf-8")
    runs = duplicate_scan.scan(duplicate_scan.sources(tmp_path), tmp_path)
    assert runs == {("kproto/a.py", "kproto/b.py"): [(1, 7, 2, 8)]}  # constants alone are no copy
