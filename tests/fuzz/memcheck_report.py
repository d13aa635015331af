"""Read a valgrind memcheck log and count the reports that concern kproto's compiled code.

A release build of CPython trips memcheck in places that are not bugs (the
small-int cache, the garbage collector walking objects), so the whole-process
error count says little. What matters is an invalid read / write / free, a use
of uninitialised memory or a definitely-lost block with a frame of kproto's
extension modules on its stack. Exit status 1 when there is any.

    python -m tests.fuzz.memcheck_report /tmp/kproto-valgrind-tests.log
"""

from __future__ import annotations

import re
import sys

_OURS = re.compile(r"kproto/_c/|6kproto_2_c|_(?:codec|records|capture|batch|buffer)\.cpython")
_PROBLEM = re.compile(
    r"Invalid (?:read|write|free)|uninitialised|definitely lost|Mismatched free|overlap|"
    r"Source and destination"
)


def kproto_reports(text: str) -> list[str]:
    blocks = re.split(r"\n==\d+== \n", text)
    return [block for block in blocks if _OURS.search(block) and _PROBLEM.search(block)]


def main(path: str) -> int:
    with open(path, errors="replace") as handle:
        text = handle.read()
    ours = kproto_reports(text)
    summary = re.findall(r"ERROR SUMMARY: .*", text)
    leaks = re.findall(r"definitely lost: .*", text)
    print(
        f"memcheck: {len(ours)} report(s) in kproto code; whole process: "
        f"{summary[-1] if summary else 'no summary (still running?)'}; "
        f"{leaks[-1] if leaks else 'no definitely lost blocks'}"
    )
    for block in ours[:5]:
        print(block[:3000])
    return 1 if ours else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
