"""The JDK's tools, and the tools' small Java programs compiled once into the cache.

The Java codec oracle (tools/java_oracle.py) and the Java client session of the real-traffic
check (tools/real_traffic.py) are single Java sources compiled against a Kafka release's
jars. Both are compiled here, one rule for all: the classes go to ``<out_root>/<digest>``,
the digest naming the source, the classpath and the javac, so a changed source or release
compiles again; a build is renamed into place whole, so two runs compiling at once never
see half of one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path


class JavaUnavailable(RuntimeError):
    """No JDK tool of that name: the message says what to install."""


class JavaBuildError(RuntimeError):
    """javac refused a source; the message carries its errors."""


def jdk_tool(name: str) -> str:
    """``java`` or ``javac``: $JAVA_HOME/bin first, else PATH; JavaUnavailable naming the fix."""
    home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(home, "bin", name)] if home else []
    candidates.append(shutil.which(name) or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise JavaUnavailable(
        f"{name} is not on PATH (nor in $JAVA_HOME): a JDK 17 or newer is needed "
        f"(scripts/install-java.sh installs a runtime; javac needs the JDK package)"
    )


def compiled(source: Path, classpath: str, out_root: Path, main_class: str) -> Path:
    """The directory holding ``source`` compiled against ``classpath``, compiled now if needed."""
    javac = jdk_tool("javac")
    digest = hashlib.sha256(source.read_bytes() + classpath.encode() + javac.encode()).hexdigest()[:16]
    out = out_root / digest
    if (out / f"{main_class}.class").is_file():
        return out
    out_root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="build-", dir=out_root))
    done = subprocess.run(
        [javac, "-nowarn", "-d", str(work), "-cp", classpath, str(source)], capture_output=True, text=True, timeout=300
    )
    if done.returncode != 0:
        shutil.rmtree(work, ignore_errors=True)
        raise JavaBuildError(f"javac failed on {source}:\n{done.stderr[-3000:]}")
    try:
        work.rename(out)  # whole or not at all, when two runs compile at once
    except OSError:
        shutil.rmtree(work, ignore_errors=True)
    return out
