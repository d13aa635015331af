"""Which optional extra brings which package, and the one way an install hint is written.

The codec needs nothing beyond Python; the columnar parts, Spark and the
compression codecs come with extras (pyproject.toml). A hint must work from a
PyPI-style index and from a checkout, where ``kproto[arrow]`` names nothing.
"""

from __future__ import annotations

#: The extra that installs each optional top-level package.
EXTRA_OF_PACKAGE = {
    "numpy": "arrow",
    "pyarrow": "arrow",
    "pyspark": "spark",
    "pandas": "spark",
    "cramjam": "compression",
}


def install_hint(extra: str) -> str:
    """``pip install 'kproto[EXTRA]'``, and the same from a checkout."""
    return f"pip install 'kproto[{extra}]' (from a checkout: pip install '.[{extra}]')"


def missing_package_message(package: str | None) -> str | None:
    """One line for a missing optional package (None when ``package`` is no extra's)."""
    top = (package or "").split(".", 1)[0]
    extra = EXTRA_OF_PACKAGE.get(top)
    if extra is None:
        return None
    return f"needs {top}, which is not installed: {install_hint(extra)}"
