"""Apache Kafka's own Java codec as an oracle: compile it, run it, ask it (issue 36).

``tools/oracle/KafkaCodecOracle.java`` reads and writes message bodies with the
generated classes of a Kafka release (``org.apache.kafka.common.message.*``) and
prints their generated JSON form. This module compiles it with ``javac`` against
that release's jars (``scripts/install-kafka.sh VERSION`` puts them in the cache),
into the cache beside them, again whenever the source changes, and talks to one
long-lived JVM over a line protocol, so a test of hundreds of thousands of
messages starts Java once::

    with JavaOracle() as oracle:
        apis = oracle.apis()                              # what the jar knows
        [answer] = oracle.ask([("parse", "18:request", 3, "0000")])

Every answer is a dict: ``{"ok": True, "hex": ..., "json": ...}`` or
``{"ok": False, "stage": ..., "error": ...}``. A missing java, javac or jar is an
:class:`OracleUnavailable` naming what to install; a JVM that stops answering is an
:class:`OracleError` after ``timeout`` seconds, never a hang.

A message is ``API_KEY:request`` or ``API_KEY:response`` (an API's body), or the
simple name of a generated class (``RequestHeaderData``, ``ConsumerProtocolAssignment``).

From the command line: ``python tools/java_oracle.py list`` (the jar's APIs),
``python tools/java_oracle.py describe CLASS`` (its versions), or
``python tools/java_oracle.py parse|encode MESSAGE VERSION PAYLOAD``.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "tools" / "oracle" / "KafkaCodecOracle.java"
MAIN_CLASS = "KafkaCodecOracle"
#: The newest release the project checks against (scripts/install-kafka.sh KAFKA_RELEASES).
NEWEST_KAFKA = "4.4.0"
INSTALL_HINT = "scripts/install-kafka.sh"

sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))
import java_build  # noqa: E402  (tools/ is no package)
import kafka_broker  # noqa: E402

from kproto._common.cache import cache_root  # noqa: E402  (the one cache rule)
from kproto.schema import ARRAY, RECORDS, STRUCT, UUID  # noqa: E402


class OracleUnavailable(RuntimeError):
    """Java, javac or the Kafka jars are missing: the message says how to get them."""


class OracleError(RuntimeError):
    """The oracle JVM died, or did not answer in time."""


def kafka_libs(version: str = NEWEST_KAFKA) -> list[Path]:
    """The jars of a Kafka release's runtime classpath, or OracleUnavailable."""
    libs = kafka_broker.kafka_cache() / version / "libs"
    jars = sorted(libs.glob("*.jar"))
    if not any(j.name.startswith("kafka-clients-") for j in jars):
        raise OracleUnavailable(f"the Apache Kafka {version} jars are not in {libs}: run {INSTALL_HINT} {version}")
    return jars


def _tool(name: str) -> str:
    try:
        return java_build.jdk_tool(name)
    except java_build.JavaUnavailable as exc:
        raise OracleUnavailable(str(exc)) from None


def compile_oracle(version: str = NEWEST_KAFKA) -> Path:
    """The directory of the compiled oracle for a release, compiled now if the source changed."""
    classpath = os.pathsep.join(map(str, kafka_libs(version)))
    try:
        return java_build.compiled(SOURCE, classpath, cache_root() / "oracle" / version, MAIN_CLASS)
    except java_build.JavaUnavailable as exc:
        raise OracleUnavailable(str(exc)) from None
    except java_build.JavaBuildError as exc:
        raise OracleError(f"the oracle against Kafka {version}: {exc}") from None


class JavaOracle:
    """One oracle JVM; use as a context manager so it is always stopped."""

    def __init__(self, version: str = NEWEST_KAFKA, timeout: float = 120.0) -> None:
        self.version = version
        self.timeout = timeout
        classes = compile_oracle(version)
        classpath = os.pathsep.join([str(classes), *map(str, kafka_libs(version))])
        # A file, not a pipe: a JVM that writes much to stderr must not stall on a full pipe.
        self._errors = tempfile.TemporaryFile(mode="w+", encoding="utf-8")
        self._proc = subprocess.Popen(
            [_tool("java"), "-Xmx768m", "-XX:+UseSerialGC", "-Xss8m", "-cp", classpath, MAIN_CLASS],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._errors,
            text=True,
            encoding="utf-8",
            bufsize=1 << 16,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            self._lines.put(line)
        self._lines.put(None)  # end of output: the JVM is gone

    def ask(self, requests: list[tuple]) -> list[dict]:
        """Answers to (command, message, version, payload) requests, in order.

        Written from a thread while the answers are read, so a large batch cannot
        fill both pipes and stall.
        """
        lines = [" ".join(map(str, r)) for r in requests]
        if any("\n" in line for line in lines):
            raise ValueError("a request must be one line")
        errors: list[BaseException] = []

        def write() -> None:
            try:
                assert self._proc.stdin is not None
                self._proc.stdin.write("".join(line + "\n" for line in lines))
                self._proc.stdin.flush()
            except BaseException as exc:  # surfaces below as a dead JVM
                errors.append(exc)

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        answers = [self._answer() for _ in lines]
        writer.join(self.timeout)
        return answers

    def _answer(self) -> dict:
        try:
            line = self._lines.get(timeout=self.timeout)
        except queue.Empty:
            self.close()
            raise OracleError(f"the Kafka {self.version} oracle did not answer within {self.timeout}s") from None
        if line is None:
            raise OracleError(f"the Kafka {self.version} oracle exited ({self._proc.poll()}): {self._stderr()}")
        return json.loads(line)

    def _stderr(self) -> str:
        try:
            self._errors.seek(0)
            return self._errors.read()[-2000:]
        except (OSError, ValueError):
            return ""

    def apis(self) -> list[dict]:
        """Every API of the jar: api_key, name, request / response class, lowest, highest
        (unstable versions included) and highest_stable; or ``unusable`` for a key the
        release keeps only as a name."""
        [answer] = self.ask([("list",)])
        if not answer["ok"]:
            raise OracleError(f"the Kafka {self.version} oracle could not list its APIs: {answer['error']}")
        return answer["apis"]

    def versions(self, class_name: str) -> tuple[int, int] | None:
        """(lowest, highest) version of a generated class, None if the jar has no such class."""
        [answer] = self.ask([("describe", class_name)])
        return (answer["lowest"], answer["highest"]) if answer["ok"] else None

    def close(self) -> None:
        if self._proc.poll() is None:
            try:
                if self._proc.stdin:
                    self._proc.stdin.close()  # end of input: the loop ends, the JVM exits
                self._proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
                self._proc.wait(timeout=10)
        if self._proc.stdout:
            self._proc.stdout.close()
        self._errors.close()

    def __enter__(self) -> JavaOracle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ------------------------------------------------------------------ representation
def kafka_json(fields: dict, plan, *, records_as_size: bool, omit_default_tags: bool) -> dict:
    """kproto's ``to_dict()`` of a message (or struct) in Kafka's generated JSON form.

    The one place where the two representations meet; each difference is mapped here:

    * names: kproto's snake_case attribute -> Kafka's field name with its first letter
      lowered (``topic_id`` -> ``topicId``, as the JsonConverter writes them);
    * only the fields of ``plan``'s version (``to_dict()`` has those of every version);
    * UUIDs: kproto's ``str(uuid.UUID)`` -> Kafka's ``Uuid.toString()``, URL-safe base64
      of the 16 bytes without padding;
    * bytes: base64 in both (Jackson's BinaryNode and ``to_dict()`` use the standard
      alphabet with padding): unchanged;
    * records: the JsonConverter writes records empty when "serializing" them, so the
      form Java prints (``records_as_size``) is ``<name>SizeInBytes`` = their length
      (``<name>: null`` when null), and the form Java reads is base64 like bytes;
    * integers of every width (int64, uint32 too) are JSON numbers in both; float64 is a
      JSON number, NaN and the infinities as the bare tokens Python's json writes;
    * tagged fields: Java prints one only when it differs from its default
      (``omit_default_tags``); Java reads a missing one as its default;
    * ``_unknown_tags``: Kafka's JSON form has no place for them; dropped.
    """
    names = _kafka_names(plan.cls._message_name)
    defaults = plan.cls().to_dict() if omit_default_tags else None
    out: dict = {}
    for op in plan.fields + plan.tagged:
        name = names[plan.name, op.name]
        # Compared as kproto has it: a struct holding unknown tagged fields is no default.
        if defaults is not None and op.tag >= 0 and fields[op.name] == defaults[op.name]:
            continue
        value = _kafka_value(op, op.kind, fields[op.name], records_as_size, omit_default_tags)
        if op.kind == RECORDS and records_as_size and value is not None:
            out[name + "SizeInBytes"] = value
        else:
            out[name] = value
    return out


def _kafka_value(op, kind: int, value, records_as_size: bool, omit_default_tags: bool):
    if value is None:
        return None
    if kind == UUID:
        return base64.urlsafe_b64encode(uuid.UUID(value).bytes).rstrip(b"=").decode("ascii")
    if kind == RECORDS and records_as_size:
        return len(base64.b64decode(value))
    if kind == STRUCT:
        return kafka_json(value, op.child, records_as_size=records_as_size, omit_default_tags=omit_default_tags)
    if kind == ARRAY:
        return [_kafka_value(op, op.elem_kind, v, records_as_size, omit_default_tags) for v in value]
    return value


@functools.cache
def _kafka_names(message: str) -> dict[tuple[str, str], str]:
    """(struct name, kproto field name) -> Kafka's JSON field name, over every version."""
    from kproto.schema import spec
    from kproto.schema._shapes import F_CHILDREN, F_KAFKA_NAME, F_NAME, F_STRUCT

    names: dict[tuple[str, str], str] = {}

    def walk(struct: str, fields: tuple) -> None:
        for f in fields:
            names[struct, f[F_NAME]] = f[F_KAFKA_NAME][:1].lower() + f[F_KAFKA_NAME][1:]
            if f[F_STRUCT] is not None:
                walk(f[F_STRUCT], f[F_CHILDREN])

    for _versions, _origin, fields in spec(message)["layers"]:
        walk(message, fields)
    return names


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in ("list", "describe", "parse", "encode"):
        print(__doc__.split("From the command line:")[1].strip(), file=sys.stderr)
        return 2
    try:
        with JavaOracle() as oracle:
            if argv[0] == "list":
                for api in oracle.apis():
                    print(json.dumps(api))
            else:
                print(json.dumps(oracle.ask([tuple(argv)])[0]))
    except (OracleUnavailable, OracleError) as exc:
        print(f"java_oracle: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
