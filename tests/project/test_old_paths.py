"""The module paths before the three layers (issue 39): each still imports, warns, and names its new home."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

from kproto import _deprecation

pytest.importorskip("pyarrow")


def _import_fresh(name: str):
    for loaded in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        if _deprecation.new_path(loaded) is not None:
            del sys.modules[loaded]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(name)
    return module, [str(w.message) for w in caught if w.category is DeprecationWarning]


@pytest.mark.parametrize("old", sorted(_deprecation.MOVED_MODULES))
def test_an_old_path_imports_the_new_module_with_a_warning(old):
    module, messages = _import_fresh(old)
    new = importlib.import_module(_deprecation.MOVED_MODULES[old])
    assert any(m.startswith(f"{old} is deprecated") and m.endswith(f"use {new.__name__}") for m in messages), messages
    public = [name for name in dir(new) if not name.startswith("__")]
    assert public and all(getattr(module, name) is getattr(new, name) for name in public)
    assert module.__name__ == old  # an alias: the new module keeps its own name


def test_a_moved_package_carries_its_submodules():
    module, messages = _import_fresh("kproto.spark.worker")
    from kproto.analyze.spark import worker

    assert module.parts_schema is worker.parts_schema
    assert any("kproto.spark.worker is deprecated" in m and "kproto.analyze.spark.worker" in m for m in messages)
    from kproto.spark.planning import plan_file  # noqa: F401  (from-import of a submodule)


def test_names_that_moved_to_another_module_warn_and_are_the_new_ones():
    from kproto.arrow import exchanges, topic_names

    batch, _ = _import_fresh("kproto.batch")
    for module, names in (
        (exchanges, ("pair", "pair_schema", "pair_rows")),
        (topic_names, ("topic_names", "topic_names_schema", "topic_naming_versions")),
    ):
        where = module.__name__.replace(".", r"\.")
        for name in names:
            with pytest.warns(DeprecationWarning, match=rf"kproto\.batch\.{name} is deprecated.*{where}\.{name}"):
                assert getattr(batch, name) is getattr(module, name)
    with pytest.raises(AttributeError):
        batch.no_such_name  # noqa: B018
    old_fingerprint, _ = _import_fresh("kproto.fingerprint")
    from kproto.analyze import fingerprint_scoring

    with pytest.warns(DeprecationWarning, match=r"kproto\.fingerprint\.evaluate is deprecated.*fingerprint_scoring"):
        assert old_fingerprint.evaluate is fingerprint_scoring.evaluate


def test_the_new_modules_import_no_old_path():
    for old in _deprecation.MOVED_MODULES:
        assert _deprecation.new_path(old) is not None
    unmoved = [
        name
        for name in ("kproto.records", "kproto.versions", "kproto.arrow", "kproto.analyze")
        if _deprecation.new_path(name) is not None
    ]
    assert unmoved == []


def test_python_dash_m_on_an_old_path_runs_the_command():
    run = subprocess.run(
        [sys.executable, "-W", "always::DeprecationWarning", "-m", "kproto.cli", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0 and run.stdout.startswith("kproto ")
    assert "kproto.cli is deprecated" in run.stderr and "kproto.analyze.cli" in run.stderr
