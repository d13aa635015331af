"""Entry point of an atheris (libFuzzer) run; started by ``run.py --engine atheris``.

kproto must be instrumented before anything imports it, so this module imports
nothing of kproto (or of the harness, which imports kproto) until atheris is set up:
``python -m tests.fuzz.atheris_main TARGET [libFuzzer flags...]``.
"""

from __future__ import annotations

import os
import sys

import atheris

with atheris.instrument_imports(include=["kproto"]):
    # the pure-Python twins carry the coverage; the compiled modules are imported as they are
    import kproto  # noqa: F401
    import kproto._py.buffer  # noqa: F401
    import kproto._py.capture  # noqa: F401
    import kproto._py.codec  # noqa: F401
    import kproto._py.records  # noqa: F401
    import kproto.compression  # noqa: F401
    import kproto.framing  # noqa: F401

from tests.fuzz import targets  # noqa: E402


def main() -> None:
    target = sys.argv[1]
    if os.environ.get("KPROTO_FUZZ_ONLY"):  # run.py --only c|py
        targets.select((os.environ["KPROTO_FUZZ_ONLY"],))
    function = targets.TARGETS[target]

    def one_input(data: bytes) -> None:
        function(data)  # a FuzzFailure escapes: libFuzzer saves the input and stops

    atheris.Setup([sys.argv[0]] + sys.argv[2:], one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
