"""Runs of six or more lines of the same shape in two places of kproto/ (issue 20's figure).

A line's shape is the line with its names, numbers and strings replaced by placeholders,
so two places that differ only in what they call things are one shape. A line is a
logical one: a bracket's continuation lines are joined to it, so wrapping (by hand or by
``ruff format``) does not change what is found. Blank lines,
comments, imports and lone punctuation are passed over; so are runs that stand in more
than MAX_PLACES places (a shape that common is a language idiom, not a copy). Generated
files are not read.

Every pair of files found is listed: in ALLOWED with the reason it stays (the intentional
C / pure-Python mirrors, families of one-line public methods, stubs), or in
NOT_FOLDED_YET with where its fold belongs. tests/project/test_layout.py runs the scan and fails
on a pair not listed, and on a listed pair the scan no longer finds.

    python tools/duplicate_scan.py            every pair found, allowed or not
    python tools/duplicate_scan.py --check    only the pairs not listed; exit 1 if any
"""

from __future__ import annotations

import keyword
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MIN_LINES = 6
MAX_PLACES = 8
SOURCE_SUFFIXES = (".py", ".pyi", ".pyx", ".pxi", ".pxd", ".h")

#: Written by tools (gen_schema.py, gen_stubs.py, record_fingerprints.py, record_brokers.py,
#: record_clients.py); never edited by hand.
GENERATED = frozenset(
    {
        "kproto/schema/_messages.py",
        "kproto/_common/error_codes.py",
        "kproto/_common/api_keys.py",
        "kproto/messages.pyi",
        "kproto/broker_recordings.py",
        "kproto/analyze/client_recordings.py",
    }
)

_MIRROR = "C / pure-Python twins: one rule in each implementation, kept alike line for line"
_PUBLIC_TYPES = "public API: one method per Kafka type, each one call of the shared reader or writer"
_STUB = "type stub: the signatures of methods that share a shape"

#: (file, file) -> why the pair stays: intentional repeats. A file with itself: repeats
#: inside one file.
ALLOWED: dict[tuple[str, str], str] = {
    ("kproto/_c/_capture_reassembly.pxi", "kproto/_py/capture_reassembly.py"): _MIRROR,
    ("kproto/_c/_capture_kinds.pxi", "kproto/_py/capture_kinds.py"): _MIRROR,
    ("kproto/_c/_capture_reader.pxi", "kproto/_py/capture_reader.py"): _MIRROR,
    ("kproto/_c/_capture_framer.pxi", "kproto/_py/capture_framer.py"): _MIRROR,
    ("kproto/_c/_records.pyx", "kproto/_py/records_base.py"): _MIRROR,
    ("kproto/_c/_records.pyx", "kproto/_py/records.py"): _MIRROR,
    ("kproto/_c/_records_legacy.pxi", "kproto/_py/records_legacy.py"): _MIRROR,
    ("kproto/_c/_buffer.pyx", "kproto/_c/_buffer.pyx"): _PUBLIC_TYPES,
    ("kproto/_py/buffer.py", "kproto/_py/buffer.py"): _PUBLIC_TYPES,
    ("kproto/_c/_buffer.pyi", "kproto/_c/_buffer.pyi"): _STUB,
    ("kproto/_c/_buffer.pyi", "kproto/_c/_records.pyi"): _STUB,
    ("kproto/_py/codec.py", "kproto/_py/codec.py"): "the twin's walk: one branch per field kind, each one reader call",
    (
        "kproto/_c/_codec_walk.pxi",
        "kproto/_c/_codec_walk.pxi",
    ): "the one plan walker's kind dispatch (walk_value, rendered by tools/gen_walkers.py from "
    "_kinds.pxi.in): one branch per field kind, a line for each sink",
    (
        "kproto/_c/_records.pyx",
        "kproto/_c/_records.pyx",
    ): "Record's optional fields: one property pair per field, each one call of the shared "
    "_optional_int64 / _set_optional_int64",
}

#: Real repeats not folded yet, with where the fold belongs; the list only shrinks.
NOT_FOLDED_YET: dict[tuple[str, str], str] = {}

_CYTHON_WORDS = {
    "cdef",
    "cpdef",
    "ctypedef",
    "cimport",
    "inline",
    "nogil",
    "noexcept",
    "struct",
    "enum",
    "extern",
    "include",
    "readonly",
    "public",
    "except",
    "gil",
}
_STRING = re.compile(r"""[rbfuRBFU]{0,2}("(?:\\.|[^"\\])*"|'(?:\\.|[^'\\])*')""")
_NUMBER = re.compile(r"\b(?:0[xX][0-9a-fA-F_]+|\d[\d_]*(?:\.\d+)?(?:[eE][+-]?\d+)?)\b")
_WORD = re.compile(r"\b[A-Za-z_]\w*\b")
_CONTROL = re.compile(r"^(?:return|break|continue|raise|yield)\b")
_DOES_SOMETHING = re.compile(r"[(\[.+\-/%&|^<>=!]")
_PLAIN_ASSIGNMENT = re.compile(r"^(?:cdef (?:I )+)?I(?:\.I)?(?:: I)? = [ISN],?$")
_ADJACENT_STRINGS = re.compile(r"\bS(?:\s+S\b)+")
_INNER_SPACE = re.compile(r"([(\[{]) ")
_TRAILING_COMMA = re.compile(r",? ([)\]}])")
_SKIPPED = re.compile(r"^(?:#|//|/\*|\*|from\s+\S+\s+c?import\b|c?import\s|[\s()\[\]{}:,;]*$|\"\"\"$|'''$)")


def shape(line: str) -> str:
    """The line with strings as S, numbers as N and names as I (keywords kept)."""
    line = _ADJACENT_STRINGS.sub("S", _STRING.sub("S", line.strip()))  # "a" "b" is one string
    line = _NUMBER.sub("N", line)
    line = _WORD.sub(
        lambda m: (
            m.group(0)
            if keyword.iskeyword(m.group(0)) or m.group(0) in _CYTHON_WORDS or m.group(0) in ("S", "N")
            else "I"
        ),
        line,
    )
    return re.sub(r"\s+", " ", line)


def thin(line_shape: str) -> bool:
    """A line that does nothing a copy could get wrong: a declaration, a name, a
    constant or a list entry (no call, index, attribute or operator beyond a plain
    ``name = value`` or a constructor's ``self.name = name``, and no return, raise or
    jump)."""
    if _CONTROL.match(line_shape):
        return False
    return _DOES_SOMETHING.search(_PLAIN_ASSIGNMENT.sub("", line_shape)) is None


def logical_lines(path: Path) -> list[tuple[int, str]]:
    """(first line number, text) of each line, a bracket's continuation lines joined to it.

    So a statement has one shape however it is wrapped (by hand or by ``ruff format``): the
    brackets' inner spaces and trailing commas go. C headers keep their physical lines
    (their braces are blocks)."""
    physical = path.read_text(encoding="utf-8").split("\n")
    if path.suffix == ".h":
        return [(number, line.strip()) for number, line in enumerate(physical, 1)]
    out: list[tuple[int, str]] = []
    depth, in_docstring = 0, False
    for number, line in enumerate(physical, 1):
        stripped = line.strip()
        quotes = stripped.count('"""') + stripped.count("'''")
        if not in_docstring and not quotes:
            code = _STRING.sub("S", stripped).split("#", 1)[0]
            opened = depth
            depth = max(0, depth + sum(map(code.count, "([{")) - sum(map(code.count, ")]}")))
            if opened:
                if code.strip():
                    out[-1] = (out[-1][0], f"{out[-1][1]} {code.strip()}")
                continue
            stripped = code.strip()
        if quotes % 2:
            in_docstring = not in_docstring
        out.append((number, stripped))
    return [(number, _TRAILING_COMMA.sub(r"\1", _INNER_SPACE.sub(r"\1", text))) for number, text in out]


def code_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, shape) of each line that counts."""
    out = []
    for number, line in logical_lines(path):
        if line and not _SKIPPED.match(line):
            line_shape = shape(line)
            if not thin(line_shape):
                out.append((number, line_shape))
    return out


def sources(root: Path = ROOT) -> list[Path]:
    return sorted(
        p
        for p in (root / "kproto").rglob("*")
        if p.suffix in SOURCE_SUFFIXES and p.relative_to(root).as_posix() not in GENERATED
    )


def scan(files: list[Path], root: Path = ROOT) -> dict[tuple[str, str], list[tuple[int, int, int, int]]]:
    """(file, file) -> runs (first line, last line in the one, first, last in the other)."""
    lines = {p.relative_to(root).as_posix(): code_lines(p) for p in files}
    places = defaultdict(list)  # window of MIN_LINES shapes -> (file, index of its first line)
    for name, rows in lines.items():
        for i in range(len(rows) - MIN_LINES + 1):
            places[tuple(s for _, s in rows[i : i + MIN_LINES])].append((name, i))
    matches = defaultdict(set)  # (file a, file b) -> {(index in a, index in b)}
    for spots in places.values():
        if len(spots) < 2 or len(spots) > MAX_PLACES:
            continue
        for k, (a, i) in enumerate(spots):
            for b, j in spots[k + 1 :]:
                if a == b and abs(i - j) < MIN_LINES:
                    continue  # a window overlapping itself (a run of one repeated line)
                key, pair = ((a, b), (i, j)) if (a, i) <= (b, j) else ((b, a), (j, i))
                matches[key].add(pair)
    runs = {}
    for (a, b), starts in matches.items():
        found = []
        for i, j in sorted(starts):
            if (i - 1, j - 1) in starts:
                continue  # inside a run already started
            length = 0
            while (i + length, j + length) in starts:
                length += 1
            last = length + MIN_LINES - 2
            found.append((lines[a][i][0], lines[a][i + last][0], lines[b][j][0], lines[b][j + last][0]))
        runs[(a, b)] = found
    return runs


def main(argv: list[str]) -> int:
    runs = scan(sources())
    listed = ALLOWED | NOT_FOLDED_YET
    check = "--check" in argv
    shown = {pair: r for pair, r in runs.items() if not check or pair not in listed}
    for (a, b), found in sorted(shown.items()):
        first = found[0]
        more = f" (+{len(found) - 1} more runs)" if len(found) > 1 else ""
        note = "  [allowed]" if (a, b) in ALLOWED else "  [not folded yet]" if (a, b) in NOT_FOLDED_YET else ""
        print(f"{a}:{first[0]}-{first[1]} ~ {b}:{first[2]}-{first[3]}{more}{note}")
    print(
        f"{len(runs)} pairs of files share runs of {MIN_LINES}+ lines of the same shape: "
        f"{len(set(runs) & set(ALLOWED))} allowed, {len(set(runs) & set(NOT_FOLDED_YET))} not folded yet, "
        f"{len(set(runs) - set(listed))} not listed"
    )
    return 1 if check and shown else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
