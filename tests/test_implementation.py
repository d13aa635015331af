"""Which implementation is active: never a silent fallback."""

import os

import kproto
from kproto import _impl


def test_extension_loaded_unless_disabled():
    if os.environ.get("KPROTO_NO_EXTENSIONS", "") not in ("", "0"):
        assert not kproto.extension_loaded()
        assert _impl.load("codec").__name__ == "kproto._py.codec"
    else:
        # The test command builds the extension: if it did not load, that is a failure,
        # not a reason to quietly test the pure-Python twin only.
        assert kproto.extension_loaded(), "the Cython extension was expected but did not load"
        assert _impl.load("codec").__name__ == "kproto._c._codec"
        assert _impl.available() == ("c", "py")
