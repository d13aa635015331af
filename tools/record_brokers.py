"""Record what real Apache Kafka brokers answer, into kproto/broker_recordings.py (issue 36).

    python tools/record_brokers.py                 # every release of scripts/install-kafka.sh
    python tools/record_brokers.py 4.0.2 4.4.0     # just these (the others keep their recording)
    python tools/record_brokers.py --check         # record again, compare with the committed file

Each release is started alone (tools/kafka_broker.py), asked, and stopped:

* **ApiVersions**: the answer to kproto's handshake (every api key with its min and
  max version; keys kproto has no definition for are kept as numbers). This is the
  broker-release table of :mod:`kproto.versions` for the releases recorded.
* **Probes**: for every API kproto's tables say KIP-896 deprecated or Kafka 4.x removed,
  each version from kproto's lowest up to the lowest one kept (and v0 of the consumer-group
  APIs none of them touched, as a control), encoded by kproto with a
  minimal body and sent alone on a fresh connection (SaslHandshake to the SASL_PLAINTEXT
  listener, everything else to PLAINTEXT). What the broker did: ``answered`` (the error
  codes of its answer), ``unsupported`` (an answer carrying UNSUPPORTED_VERSION, 35),
  ``closed`` (the connection closed without an answer), ``timeout`` or ``undecodable``.

The file holds protocol facts only: releases, versions, outcomes and error names.
"""

from __future__ import annotations

import argparse
import datetime
import platform
import pprint
import socket
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kafka_broker  # noqa: E402  (tools/ is no package)

ROOT = kafka_broker.ROOT
OUTPUT = ROOT / "kproto" / "broker_recordings.py"
PROBE_TIMEOUT = 10.0
MAX_ANSWER = 16 * 1024 * 1024
UNSUPPORTED_VERSION = 35
# Bodies that every version the broker keeps accepts and answers at once: an acknowledged
# produce of nothing, a named SASL mechanism, a topic creation that does not wait, an ACL filter
# matching ANY (kproto's default 0 is UNKNOWN, which the broker refuses to parse).
# field -> (value, first version that has the field); every other field: kproto's default.
BODY_FIELDS = {
    "Produce": {"acks": (1, 0), "timeout_ms": (1000, 0)},
    "JoinGroup": {"session_timeout_ms": (10000, 0)},
    "SaslHandshake": {"mechanism": (kafka_broker.SASL_MECHANISM, 0)},
    "CreateTopics": {"timeout_ms": (1000, 0)},
    "DeleteTopics": {"timeout_ms": (1000, 0)},
    "DescribeAcls": {
        "resource_type_filter": (1, 0),
        "operation": (1, 0),
        "permission_type": (1, 0),
        "pattern_type_filter": (1, 1),
    },
}
SASL_APIS = {"SaslHandshake"}
# Consumer-group APIs that neither KIP-896 nor 4.x touched: their v0 is probed too, as a control.
ALSO_PROBED = ("Heartbeat", "LeaveGroup", "SyncGroup", "DescribeGroups", "ListGroups")


def table_name(release: str) -> str:
    """The name of a recorded release in the broker-release table: its line (``"4.1.2"`` ->
    ``"4.1"``) for the newest patch of the line the project checks, else the release itself
    (``"4.0.0"``, recorded because it differs from the later 4.0 patches)."""
    line = ".".join(release.split(".")[:2])
    return line if kafka_broker.resolve(line) == release else release


# ---------------------------------------------------------------- what to probe
def probe_plan() -> list[tuple[int, int]]:
    """(api_key, version) pairs: per API that KIP-896 deprecated or 4.x removed (by kproto's
    tables), every version from kproto's lowest to the lowest one kept (the first above both);
    and the lowest version of each API of :data:`ALSO_PROBED`."""
    from kproto import versions as v

    plan = []
    for info in v.api_table():
        marked = [r for r in (info.deprecated, info.removed_in_4x) if r is not None]
        if marked:
            last = min(max(hi for _lo, hi in marked) + 1, info.max_version)
            plan += [(info.api_key, version) for version in range(info.min_version, last + 1)]
        elif info.name in ALSO_PROBED:
            plan.append((info.api_key, info.min_version))
    return plan


def probe_request(api_key: int, version: int, correlation_id: int) -> bytes:
    """The size-prefixed request frame kproto encodes for one probe."""
    import kproto
    from kproto import messages
    from kproto import versions as v

    name = v.api_name(api_key)
    fields = {field: value for field, (value, first) in BODY_FIELDS.get(name, {}).items() if version >= first}
    body = getattr(messages, f"{name}Request")(**fields)
    return kproto.encode_request(
        body, version=version, correlation_id=correlation_id, client_id="kproto-probe", size_prefixed=True
    )


def _read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        chunk = sock.recv(min(65536, count - len(data)))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def exchange_one(address: tuple[str, int], frame: bytes, timeout: float = PROBE_TIMEOUT) -> bytes | str:
    """Send one frame on a fresh connection: the answer's payload, or ``"closed"`` / ``"timeout"``."""
    with socket.create_connection(address, timeout=timeout) as sock:
        try:
            sock.sendall(frame)
            size = _read_exactly(sock, 4)
            if size is None:
                return "closed"
            length = int.from_bytes(size, "big", signed=True)
            if not 0 <= length <= MAX_ANSWER:
                return f"a size prefix of {length}"
            payload = _read_exactly(sock, length)
        except TimeoutError:
            return "timeout"
        except ConnectionResetError:
            return "closed"
        return "closed" if payload is None else payload


def error_codes(value, path: str = "") -> list[tuple[str, int]]:
    """(path, code) of every ``error_code`` in a decoded body's dict form."""
    found = []
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else key
            if key == "error_code" and isinstance(item, int):
                found.append((where, item))
            else:
                found += error_codes(item, where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += error_codes(item, f"{path}[{index}]")
    return found


def classify(api_key: int, version: int, answer: bytes | str) -> tuple[str, str]:
    """(outcome, detail) of one probe's answer."""
    import kproto
    from kproto.errors import error_name

    if isinstance(answer, str):
        return (answer, "") if answer in ("closed", "timeout") else ("undecodable", answer)
    try:
        response = kproto.decode_response(answer, api_key, version)
    except kproto.KprotoError as error:
        return "undecodable", f"{type(error).__name__}: {error}"
    codes = error_codes(response.body.to_dict())
    unsupported = [path for path, code in codes if code == UNSUPPORTED_VERSION]
    form = "" if response.api_version == version else f" (read as v{response.api_version})"
    if unsupported:
        return "unsupported", f"UNSUPPORTED_VERSION at {unsupported[0]}{form}"
    names = sorted({error_name(code) for _path, code in codes})
    return "answered", (", ".join(names) if names else "no error code") + form


def probe(broker: kafka_broker.Broker, api_key: int, version: int, correlation_id: int = 1) -> tuple[str, str]:
    from kproto import versions as v

    listener = "SASL_PLAINTEXT" if v.api_name(api_key) in SASL_APIS else "PLAINTEXT"
    answer = exchange_one(broker.address(listener), probe_request(api_key, version, correlation_id))
    return classify(api_key, version, answer)


# ---------------------------------------------------------------- one release
def record(broker: kafka_broker.Broker) -> tuple[list[tuple], list[tuple]]:
    """(ApiVersions rows, probe rows) of a running broker, under its name in the table."""
    name = table_name(broker.release)
    assert broker.api_versions is not None
    ranges = broker.api_versions.ranges
    api_rows = [(name, key, lo, hi) for key, (lo, hi) in sorted(ranges.items())]
    probe_rows = []
    for index, (api_key, version) in enumerate(probe_plan()):
        outcome, detail = probe(broker, api_key, version, correlation_id=index + 1)
        probe_rows.append((name, api_key, version, outcome, detail))
    return api_rows, probe_rows


# ---------------------------------------------------------------- the data file
def _java_version() -> str:
    done = subprocess.run([kafka_broker.java(), "-version"], capture_output=True, text=True, timeout=60)
    first = (done.stderr or done.stdout).splitlines()[0]
    return first.split('"')[1] if '"' in first else first


def render(recorded_from: dict[str, str], api_rows: list[tuple], probe_rows: list[tuple]) -> str:
    today = datetime.date.today().isoformat()
    header = f'''"""What real Apache Kafka brokers answer: recorded from the brokers themselves.

Recorded by tools/record_brokers.py on {today} (Java {_java_version()}, {platform.machine()}):
facts, do not edit; run the script again. Each broker: one KRaft node (broker and controller),
the release's default configuration (tools/kafka_broker.py), started from the Maven Central jars.

RECORDED_FROM: table release -> the release recorded for it: a line ("4.1") is recorded from
    its newest patch; an older patch that answers differently is recorded under its own name ("4.0.0").
API_VERSIONS: (table release, api_key, min_version, max_version): its ApiVersionsResponse,
    every key, including keys kproto has no definition for. kproto.versions takes these as
    the broker-release table of these releases.
PROBES: (table release, api_key, version, outcome, detail): one request of that version,
    encoded by kproto, alone on a fresh connection; outcome is "answered" (detail: the error
    names in the answer), "unsupported" (an answer carrying UNSUPPORTED_VERSION), "closed" (no
    answer, connection closed), "timeout" or "undecodable".
"""

# ruff: noqa: E501
'''
    lines = [
        header,
        "RECORDED_FROM = "
        + pprint.pformat(dict(sorted(recorded_from.items(), key=_recorded_key)), width=110, sort_dicts=False),
        "API_VERSIONS = " + pprint.pformat(tuple(api_rows), width=110, compact=True),
        "PROBES = (",
        *(f"    {row!r}," for row in probe_rows),
        ")",
        "",
    ]
    return "\n".join(lines)


def _recorded_key(item: tuple[str, str]) -> tuple[int, ...]:
    return kafka_broker.release_key(item[1])


def committed() -> tuple[dict[str, str], list[tuple], list[tuple]]:
    """What the committed file holds now (empty when there is none)."""
    if not OUTPUT.exists():
        return {}, [], []
    namespace: dict = {}
    exec(compile(OUTPUT.read_text(encoding="utf-8"), str(OUTPUT), "exec"), namespace)
    return dict(namespace["RECORDED_FROM"]), list(namespace["API_VERSIONS"]), list(namespace["PROBES"])


def record_all(releases: list[str]) -> tuple[dict[str, str], list[tuple], list[tuple]]:
    """Start each release in turn, record it, stop it; merged with the committed lines not asked for."""
    recorded_from, api_rows, probe_rows = committed()
    for release in releases:
        print(f"record_brokers: Kafka {release} ...", file=sys.stderr, flush=True)
        with kafka_broker.start(release) as broker:
            apis, probes = record(broker)
        line = table_name(release)
        recorded_from[line] = release
        api_rows = [r for r in api_rows if r[0] != line] + apis
        probe_rows = [r for r in probe_rows if r[0] != line] + probes
        print(
            f"record_brokers: {release}: {len(apis)} APIs, {len(probes)} probes ({broker.started_in:.1f} s to start)",
            file=sys.stderr,
            flush=True,
        )
    order = {
        name: index
        for index, name in enumerate(
            sorted(recorded_from, key=lambda name: kafka_broker.release_key(recorded_from[name]))
        )
    }
    api_rows.sort(key=lambda r: (order[r[0]], r[1]))
    probe_rows.sort(key=lambda r: (order[r[0]], r[1], r[2]))
    return recorded_from, api_rows, probe_rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("releases", nargs="*", help="releases to record (default: all of scripts/install-kafka.sh)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare with the committed file instead of writing it (exit 1 when different)",
    )
    args = parser.parse_args(argv)
    releases = [kafka_broker.resolve(r) for r in args.releases] or list(kafka_broker.releases())
    try:
        recorded_from, api_rows, probe_rows = record_all(releases)
    except kafka_broker.BrokerError as error:
        print(f"record_brokers: {error}", file=sys.stderr)
        return 1
    if args.check:
        _, old_apis, old_probes = committed()
        differ = sorted((set(api_rows) ^ set(old_apis)) | (set(probe_rows) ^ set(old_probes)))
        for row in differ:
            print(f"differs: {row}")
        print(f"record_brokers: {'no' if not differ else len(differ)} difference(s) from {OUTPUT.name}")
        return 1 if differ else 0
    OUTPUT.write_text(render(recorded_from, api_rows, probe_rows), encoding="utf-8")
    print(
        f"record_brokers: wrote {OUTPUT.relative_to(ROOT)} ({len(api_rows)} ApiVersions rows, "
        f"{len(probe_rows)} probes)",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
