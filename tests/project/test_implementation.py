"""Which implementation is active: never a silent fallback."""

import os

import kproto
from kproto import _impl
from tests.conftest import ROOT


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


def test_the_pure_python_pass_is_chosen_from_what_a_test_module_imports(request):
    """scripts/test.sh runs the modules marked `twin` again with KPROTO_NO_EXTENSIONS=1; the mark
    comes from the module's imports (tests/twin_selection.py), so no list can forget a new one."""
    from tests.twin_selection import application, implementation_dependent, is_twin_module

    assert request.node.get_closest_marker("twin") is not None, "conftest did not mark this module"
    for chooses in (
        "kproto.records",
        "kproto.arrow.capture",
        "kproto.arrow.frames",
        "kproto.messages",
        "kproto",
        "kproto._py.codec",
    ):
        assert implementation_dependent(chooses), chooses
    for neutral in ("kproto.errors", "kproto.limits", "kproto.compression", "kproto._common.records"):
        assert not implementation_dependent(neutral), neutral
    assert application("kproto.analyze.spark.jobs") and not application("kproto.arrow.capture")
    assert is_twin_module("from kproto import records\n")
    assert is_twin_module("def test_x():\n    from kproto import _impl\n")  # a test's own import counts
    assert not is_twin_module("from kproto.errors import DecodeError\n")
    assert not is_twin_module("from kproto.arrow import capture\nfrom kproto.analyze.spark import jobs\n")
    # The modules about the twins themselves are in the pass, whatever they import beside.
    for name in ("test_records", "test_messages", "test_headers", "test_capture", "test_batch", "test_dump"):
        (path,) = (ROOT / "tests").rglob(f"{name}.py")
        assert is_twin_module(path.read_text(encoding="utf-8")), name
