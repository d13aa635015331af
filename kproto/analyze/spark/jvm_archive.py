"""A class-data-sharing archive for the embedded Spark JVM: start in half the time.

Most of a small analysis is the JVM loading and verifying Spark's classes (about
6 s to start the session and 5 s more for the first SQL job on a 2-core machine).
The JDK can record the classes a run loaded into an archive (``-XX:ArchiveClassesAtExit``,
JDK 13+) and map it at the next start (``-XX:SharedArchiveFile``): measured on
``samples/sample.pcap``, 16 s -> 10 s of wall time (docs/analyze.md, "Where the time goes").

How kproto uses it, for local masters only (a cluster's JVMs are not ours to tune):

* ``kproto analyze`` with no archive yet records one: the JVM writes it to a
  temporary file when it exits, and :func:`finish` renames it into place once the
  JVM has exited cleanly, so a half-written archive is never used. That one run
  takes about 10 s longer; ``scripts/setup.sh --spark`` makes the archive at set-up.
* Every later local session maps it. An archive is named after the Java runtime, the
  Spark jars and kproto's plans (:data:`PLAN_MODULES`) it was made from, so a new JDK, pyspark or
  kproto records a new one, which replaces the old; the JVM checks the classpath itself
  too and ignores an archive that does not match.
* ``KPROTO_JVM_ARCHIVE=off`` turns it all off; ``KPROTO_CACHE_DIR`` moves the cache
  (default ``$XDG_CACHE_HOME/kproto``, else ``~/.cache/kproto``). An archive is about
  160 MB.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kproto._common.cache import cache_root

#: JVM logging of class-data sharing off: a signed jar it skips is not the user's concern.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
ENV_SWITCH = "KPROTO_JVM_ARCHIVE"
WAIT_FOR_JVM_S = 120
#: The modules whose Spark plans a run builds (the listing, the job, the end of a run): the archive's name
#: follows their text.
PLAN_MODULES = ("inputs.py", "decode_job.py", "jobs.py")


@dataclass
class Plan:
    """What this session does with the archive: ``use`` it, ``record`` it, or nothing."""

    action: str  # "use", "record" or "off"
    path: Path | None  # the archive
    recording: Path | None = None  # where the JVM writes it while recording

    def java_options(self) -> str:
        if self.action == "use":
            return f"-XX:SharedArchiveFile={self.path} {QUIET}"
        if self.action == "record":
            return f"-XX:ArchiveClassesAtExit={self.recording} {QUIET}"
        return ""


def cache_dir() -> Path:
    """The archive lives at the root of kproto's cache directory."""
    return cache_root()


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else None
    if found is None or not found.exists():
        which = shutil.which("java")
        found = Path(which) if which else None
    return found.resolve() if found else None


def archive_path() -> Path | None:
    """The archive for this Java runtime and these Spark jars (None without a java)."""
    import pyspark

    java = _java()
    if java is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    identity = hashlib.sha256()
    for part in (str(java), str(java.stat().st_mtime_ns), pyspark.__version__):
        identity.update(part.encode() + b"\0")
    for jar in sorted(jars.glob("*.jar")) if jars.is_dir() else ():
        identity.update(f"{jar.name}:{jar.stat().st_size}\0".encode())
    # The classes a run loads follow the plans kproto builds: other plans, another archive
    # (an archive recorded with older plans still maps, but misses the classes of the new ones).
    for module in PLAN_MODULES:
        identity.update(Path(__file__).with_name(module).read_bytes())
    return cache_dir() / f"spark-{pyspark.__version__}-{identity.hexdigest()[:16]}.jsa"


def plan(*, record: bool) -> Plan:
    """Use the archive when there is one; else record it when ``record`` (the CLI's runs)."""
    if os.environ.get(ENV_SWITCH, "on").lower() in ("off", "0", "no", "false"):
        return Plan("off", None)
    try:
        path = archive_path()
    except OSError:
        path = None
    if path is None:
        return Plan("off", None)
    _remove_abandoned_recordings(path)
    if path.is_file():
        return Plan("use", path)
    if not record:
        return Plan("off", path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return Plan("off", path)
    return Plan("record", path, path.with_name(f"{path.name}.{os.getpid()}.tmp"))


def _remove_abandoned_recordings(path: Path) -> None:
    """Recordings of runs that ended without :func:`finish` (a failed run, a kill): never
    used, since the JVM may have stopped half-way through writing them."""
    for stale in path.parent.glob(f"{path.name}.*.tmp"):
        pid = stale.name[len(path.name) + 1 : -len(".tmp")]
        if pid.isdigit() and not _alive(int(pid)):
            stale.unlink(missing_ok=True)


def _remove_superseded(path: Path) -> None:
    """Archives of the same pyspark made for another Java or another kproto: one is enough
    (160 MB each); another interpreter with the same pyspark records its own again."""
    prefix = path.name.rsplit("-", 1)[0] + "-"
    for old in path.parent.glob(f"{prefix}*.jsa"):
        if old != path:
            old.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def finish(spark) -> bool:
    """After a recording session: stop Spark, let the JVM exit (it writes the archive
    then) and move a complete archive into place. True when an archive was made."""
    chosen = getattr(spark, "_kproto_jvm_archive", None)
    if chosen is None or chosen.action != "record" or chosen.recording is None or chosen.path is None:
        return False
    from pyspark import SparkContext

    spark.stop()
    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if gateway is None or process is None:
        return False
    try:
        gateway.shutdown()
        if process.stdin is not None:
            process.stdin.close()  # the gateway server exits cleanly when its stdin closes
        code = process.wait(timeout=WAIT_FOR_JVM_S)
    except (subprocess.TimeoutExpired, OSError):
        code = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    made = code == 0 and chosen.recording.is_file() and chosen.recording.stat().st_size > 0
    if made:
        os.replace(chosen.recording, chosen.path)
        _remove_superseded(chosen.path)
    else:
        chosen.recording.unlink(missing_ok=True)
    return made
