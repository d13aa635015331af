#!/usr/bin/env python3
"""Generate the C walkers' per-kind dispatch from one template, ``kproto/_c/_kinds.pxi.in``.

The codec's plan walker (``walk_value``, sinks Build and Check, which raise; and
``fixed_width``, the kinds' widths) and the batch decoder's JSON pass (``jvalue``,
GIL-free, which stores a status) are rendered from the template's one table of field
kinds, each keeping its own signature. Each rendering goes between two marker lines of
the file that holds it, where the function was written by hand before (so the C that
Cython makes of it, down to its line numbers, and the compiled code stay):

    # generated: begin <walker> (...)
    ...
    # generated: end <walker>

Run it, then rebuild the extension:

    python tools/gen_walkers.py [--check]

``--check`` fails when a committed file is stale (``tests/project/test_one_rule.py`` runs it).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from Cython import Tempita

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "kproto" / "_c" / "_kinds.pxi.in"

#: walker -> the file holding its rendering, between the walker's marker lines
OUTPUTS = {
    "codec": ROOT / "kproto" / "_c" / "_codec_walk.pxi",
    "widths": ROOT / "kproto" / "_c" / "_codec_scan.pxi",
    "json": ROOT / "kproto" / "_c" / "_batch_json_walk.pxi",
}

#: A generated region: its begin line (the rest of the line is free text), body, end line.
REGION = re.compile(r"^(# generated: begin (\w+)\b[^\n]*\n)(.*?)^(# generated: end \2\n)", re.MULTILINE | re.DOTALL)


def render(walker: str, template: str | None = None) -> str:
    """The code of ``walker``'s region, from ``template`` (default: the committed template)."""
    text = TEMPLATE.read_text(encoding="utf-8") if template is None else template
    body = Tempita.Template(text, name=TEMPLATE.name).substitute(walker=walker)
    return body.strip("\n") + "\n"


def regions(text: str) -> dict[str, str]:
    """walker -> the code between its marker lines in ``text``."""
    return {found.group(2): found.group(3) for found in REGION.finditer(text)}


def without_regions(text: str) -> str:
    """``text`` with every generated region's code left out (its marker lines kept)."""
    return REGION.sub(lambda found: found.group(1) + found.group(4), text)


def spliced(text: str, walker: str, code: str) -> str:
    """``text`` with ``walker``'s region holding ``code``."""
    if walker not in regions(text):
        raise ValueError(f"no '# generated: begin {walker}' ... '# generated: end {walker}' lines")
    return REGION.sub(
        lambda found: found.group(1) + (code if found.group(2) == walker else found.group(3)) + found.group(4), text
    )


def stale(template: str | None = None) -> list[Path]:
    """The files whose generated region is not what the template renders."""
    return [
        path
        for walker, path in OUTPUTS.items()
        if regions(path.read_text(encoding="utf-8")).get(walker) != render(walker, template)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed walker is stale")
    args = parser.parse_args()
    if args.check:
        old = stale()
        for path in old:
            print(f"{path.relative_to(ROOT)} is stale: run python tools/gen_walkers.py", file=sys.stderr)
        return 1 if old else 0
    for walker, path in OUTPUTS.items():
        text = path.read_text(encoding="utf-8")
        new = spliced(text, walker, render(walker))
        if new != text:  # an untouched file keeps its time: the build does not recompile its module
            path.write_text(new, encoding="utf-8")
            print(f"wrote {walker} into {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
