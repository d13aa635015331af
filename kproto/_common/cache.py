"""The one directory kproto keeps its caches in, outside the checkout.

``$KPROTO_CACHE_DIR`` when set, else ``$XDG_CACHE_HOME/kproto``, else ``~/.cache/kproto``.
It holds the Spark JVM's class-data archive (``kproto/analyze/spark/jvm_archive.py``), the Kafka
releases of ``scripts/install-kafka.sh`` (``kafka/``; that script and
``scripts/install-clients.sh`` state the same rule in shell, and ``make distclean`` runs this
file), the client libraries of ``tools/record_clients.py`` (``clients/``) and
``tools/record_fingerprints.py`` (``fingerprints/``), the tools' compiled Java programs and
the headers of ``tools/cross_compile_check.py`` (``cross/``). Everything in it can be made again;
``make distclean`` removes it (README, "Caches").
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    explicit = os.environ.get("KPROTO_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kproto"
