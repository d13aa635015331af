"""Which implementation is active: never a silent fallback."""

import os

import kproto
from kproto import _impl

from .conftest import ROOT


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


def test_the_implementations_import_only_the_neutral_modules_not_each_other():
    """kproto/_c never imports kproto/_py (nor the reverse), and kproto/_common, which both
    import, imports neither: only kproto._impl chooses between them."""
    import re

    package = ROOT / "kproto"
    pattern = r"^\s*(?:from|import|cimport)\s+kproto\.{}\b|^\s*from\s+kproto\s+(?:c?import)\s+{}\b"
    rules = {"_c": ("_py",), "_py": ("_c",), "_common": ("_c", "_py")}
    for folder, forbidden in rules.items():
        for path in sorted((package / folder).iterdir()):
            if path.suffix not in (".py", ".pyx", ".pxd"):
                continue
            text = path.read_text(encoding="utf-8")
            for other in forbidden:
                hits = re.findall(pattern.format(other, other), text, flags=re.MULTILINE)
                assert not hits, f"{path.relative_to(ROOT)} imports kproto.{other}: {hits}"
