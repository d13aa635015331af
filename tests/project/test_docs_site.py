"""The docs site (mkdocs.yml: docs/*.md and the API reference rendered from the
docstrings and stubs) builds with every warning fatal: a broken link, a page left
out of the nav or a reference to a name that does not exist fails here."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SETUP = "scripts/setup.sh (make test), or pip install -e '.[docs]'"


@pytest.mark.skipif(
    os.environ.get("KPROTO_NO_EXTENSIONS", "") not in ("", "0"),
    reason="the site is built once per suite, on the extension's run",
)
@pytest.mark.skipif(not (ROOT / "mkdocs.yml").is_file(), reason="beside an installed wheel: no docs/ to build")
def test_site_builds_with_warnings_fatal(tmp_path: Path) -> None:
    missing = [m for m in ("mkdocs", "mkdocstrings") if importlib.util.find_spec(m) is None]
    assert not missing, f"the docs tools are not installed ({', '.join(missing)}): run {SETUP}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    produce = (tmp_path / "reference" / "messages" / "index.html").read_text(encoding="utf-8")
    assert "the request body of the Produce API (key 0)" in produce
    buffer = (tmp_path / "reference" / "buffer" / "index.html").read_text(encoding="utf-8")
    assert "read_compact_string" in buffer and "write_tagged_fields" in buffer
