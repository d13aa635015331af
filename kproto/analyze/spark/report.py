"""The analysis report: facts gathered with Spark, written as JSON, Markdown and HTML.

:func:`collect_facts` (Spark) and :func:`collect_facts_arrow` (pyarrow, in the driver) run the
queries of kproto/analyze/spark/report_facts.py over the output tables and return a plain dict (only
numbers, strings, lists); :func:`write_report`
turns that dict into ``report.json``, ``report.md`` and ``report.html``
(charts are inline SVG: the file needs no network and no JavaScript).
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import re
from pathlib import Path
from typing import Any

from kproto import versions as kv
from kproto._common.api_keys import ApiKey
from kproto._version import __version__
from kproto.arrow.topic_names import topic_naming_versions
from kproto.analyze.spark import next_steps, report_facts

API_VERSIONS = int(ApiKey.API_VERSIONS)   # a plain int: Spark and Arrow expressions take it


def _iso(ns: int | None) -> str | None:
    if ns is None:
        return None
    return _dt.datetime.fromtimestamp(ns / 1e9, _dt.timezone.utc).isoformat(timespec="milliseconds")


def _api(key: int | None) -> str:
    if key is None:
        return "?"
    try:
        return kv.api_name(key)
    except (KeyError, ValueError):
        return f"UNKNOWN({key})"


def _address(ip: str | None, port: int | None) -> str:
    """ip:port, or a note for frames read from a table without connection addresses."""
    return f"{ip}:{port}" if ip is not None else "(address unknown)"


def _ranges(body: str | None) -> tuple[int | None, dict[int, tuple[int, int]]]:
    if not body:
        return None, {}
    data = json.loads(body)
    return data.get("error_code"), {k["api_key"]: (k["min_version"], k["max_version"])
                                    for k in data.get("api_keys") or []}


# ---------------------------------------------------------------- facts
# What the report counts is written once, as queries (kproto/analyze/spark/report_facts.py); two executors
# run them: Spark SQL over the written tables (any size), and pyarrow over tables small enough to
# hold in the driver (no Spark job: most captures people look at are small). ``_finish`` turns the
# raw rows into the facts for both, and the tests check that the executors agree.

def collect_facts(spark, tables: dict[str, Any], summary: list[dict], input_errors: list[dict] | None = None) -> dict:
    """Every fact of the report, from the output tables (Spark DataFrames: frames, exchanges, connections,
    clients, topics) and the errors table's rows."""
    import pyspark

    return _finish(report_facts.run_spark(tables), summary, input_errors, pyspark.__version__)


def collect_facts_arrow(tables: dict[str, Any], summary: list[dict], input_errors: list[dict] | None = None,
                        spark_version: str | None = None) -> dict:
    """The facts of :func:`collect_facts` from pyarrow Tables held in the driver (frames, exchanges,
    connections, clients, topics), without a Spark job."""
    return _finish(report_facts.run_arrow(tables), summary, input_errors, spark_version)


def _finish(raw: dict[str, list[dict]], summary: list[dict], input_errors: list[dict] | None,
            spark_version: str | None) -> dict:
    """The facts from the raw rows either engine gathered."""
    facts: dict[str, Any] = {
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "kproto_version": __version__, "spark_version": spark_version,
        "summary": [dict(r, first_seen=_iso(r.get("first_ts_ns")), last_seen=_iso(r.get("last_ts_ns")))
                    for r in summary],
        "input_errors": list(input_errors or []),
    }

    # Clients and their software (KIP-511).
    clients = raw["clients"]
    for c in clients:
        c["first_seen"], c["last_seen"] = _iso(c.pop("first_seen_ns")), _iso(c.pop("last_seen_ns"))
    brokers_of: dict[tuple, list[str]] = {}
    for r in raw.get("client_brokers", []):
        brokers_of.setdefault((r["client_ip"], r["client_id"]), []).append(_address(r["server_ip"], r["server_port"]))
    for c in clients:
        c["brokers"] = sorted(set(brokers_of.get((c["client_ip"], c["client_id"]), [])))
    facts["clients"] = clients

    # Every API version in use.
    facts["api_versions"] = [dict(r, api_name=_api(r["api_key"])) for r in raw["api_versions"]]

    # Kafka 4.x readiness (KIP-896). A client's software name comes from its ApiVersions
    # request; spread it to its other requests.
    software = {(c["client_ip"], c["client_id"]): c["client_software_name"] for c in clients}
    removed, deprecated = raw["removed"], raw["deprecated"]
    for r in removed + deprecated:
        r["api_name"] = _api(r["api_key"])
        r["first_seen"], r["last_seen"] = _iso(r.pop("first_ns")), _iso(r.pop("last_ns"))
        r["software_name"] = r["software_name"] or software.get((r["client_ip"], r["client_id"]))
    for r in deprecated:     # "not removed" holds for most 4.x releases: name those that refuse it
        r["not_served_by_4x"] = list(kv.version_info(r["api_key"], r["api_version"]).not_served_by_4x)
    facts["readiness"] = {
        "removed_in_4x_requests": sum(r["requests"] for r in removed),
        "deprecated_requests": sum(r["requests"] for r in removed + deprecated),
        "clients_sending_removed_versions": len({(r["client_ip"], r["client_id"]) for r in removed}),
        "removed": removed,
        "deprecated_not_removed": deprecated,
    }

    # Brokers: what their ApiVersions responses advertise, and the release that matches.
    brokers = []
    seen = set()
    for r in sorted(raw["api_responses"], key=lambda r: (r["server_ip"] or "", r["server_port"] or 0,
                                                         r["api_version"], r["body"] or "")):
        code, ranges = _ranges(r["body"])
        if code != 0 or not ranges:
            continue
        key = (r["server_ip"], r["server_port"], tuple(sorted(ranges.items())))
        if key in seen:
            continue
        seen.add(key)
        match = kv.infer_release(ranges)
        brokers.append({
            "broker": _address(r["server_ip"], r["server_port"]), "api_versions_version": r["api_version"],
            "apis": len(ranges), "release": match.release, "exact": list(match.exact),
            "closest": list(match.closest), "inference": match.describe(),
            "ranges": {_api(k): f"{lo}-{hi}" for k, (lo, hi) in sorted(ranges.items())},
        })
    facts["brokers"] = sorted(brokers, key=lambda b: b["broker"])
    facts["next_steps"] = {"clients": next_steps.client_steps(clients, removed),
                           "brokers": next_steps.broker_steps(facts["brokers"])}

    # KIP-511 fallbacks: ApiVersions refused with UNSUPPORTED_VERSION, and the retry that followed.
    fallbacks = []
    for r in raw["fallbacks"]:
        _code, ranges = _ranges(r.pop("body"))
        r["broker_api_versions_max"] = ranges.get(API_VERSIONS, (None, None))[1]
        r["broker"] = _address(r.pop("server_ip"), r.pop("server_port"))
        r["requested_version"] = r.pop("api_version")
        r["software_name"] = software.get((r["client_ip"], r["client_id"]))
        fallbacks.append(r)
    facts["kip511_fallbacks"] = sorted(fallbacks, key=lambda r: (
        r["client_ip"] or "", r["client_id"] or "", r["broker"], r["requested_version"] or 0,
        r["retry_version"] if r["retry_version"] is not None else -1))

    facts["invalid_software_names"] = raw["invalid_software_names"]
    facts["errors"] = [dict(r, api_name=_api(r["api_key"])) for r in raw["errors"]]
    facts["latency"] = [{"api_key": r["api_key"], "api_name": _api(r["api_key"]), "exchanges": r["exchanges"],
                         "p50_ms": r["p50_ns"] / 1e6, "p99_ms": r["p99_ns"] / 1e6, "max_ms": r["max_ns"] / 1e6}
                        for r in raw["latency"]]

    topics = raw["topics"]
    for t in topics:
        span = ((t["last_ts_ns"] or 0) - (t["first_ts_ns"] or 0)) / 1e9
        t["seconds"] = span
        t["produce_bytes_per_s"] = t["produce_bytes"] / span if span > 0 else None
        t["fetch_bytes_per_s"] = t["fetch_bytes"] / span if span > 0 else None
        t["first_seen"], t["last_seen"] = _iso(t.pop("first_ts_ns")), _iso(t.pop("last_ts_ns"))
    facts["topics"] = topics
    # KIP-516: IDs no captured response named (the topics table keeps them with topic null).
    facts["unnamed_topic_ids"] = [r["topic_id"] for r in raw["unnamed_topic_ids"]]
    facts["undecodable_frames"] = [dict(r, api_name=_api(r["api_key"])) for r in raw["undecodable_frames"]]
    facts["unpaired"] = [dict(r, api_name=_api(r["api_key"])) for r in raw["unpaired"]]
    # Connections that are not Kafka (the connections table's kind): counted, never in frames.
    facts["other_protocols"] = raw["other_protocols"]
    return facts


#: How the report names a kind of connection that is not Kafka.
KIND_LABELS = {"tls": "TLS", "zookeeper": "ZooKeeper", "http": "HTTP", "other": "another protocol"}


def tls_lines(facts: dict) -> list[str]:
    """One sentence per port whose connections are TLS: Kafka there is out of reach without keys."""
    lines = []
    for r in facts.get("other_protocols", []):
        if r["kind"] == "tls":
            many = r["connections"] != 1
            lines.append(f"{r['connections']:,} connection{'s' if many else ''} on port {r['server_port']} "
                         f"{'are' if many else 'is'} TLS ({_fmt(r['bytes'])} bytes): their Kafka traffic cannot be "
                         "read without keys.")
    return lines


# ---------------------------------------------------------------- writing
def write_report(facts: dict, out: Path) -> dict[str, Path]:
    """report.json, report.md and report.html under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(facts, indent=2, sort_keys=True, default=str) + "\n")
    paths["md"].write_text(markdown(facts))
    paths["html"].write_text(html_report(facts))
    return paths


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, (list, tuple)):
        return ", ".join(_fmt(v) for v in value) or "-"
    return str(value)


def _when(iso: str | None) -> str:
    """An ISO time of the facts as a table shows it: UTC (said in the header), no zone suffix."""
    if not iso:
        return "-"
    return iso.replace("T", " ").removesuffix("+00:00")


_NUMBER = re.compile(r"-?[\d,]+(\.\d+)?")


#: A run of letters and digits up to this long is a word, never broken across lines; a longer
#: one (an id, a hash) may break, every LONG_RUN characters (tools/report_screenshot.py checks both).
LONG_RUN = 24
_SEPARATOR = re.compile(r"([/_.])(?=\w)")
_LONG_RUN = re.compile(rf"[A-Za-z0-9]{{{LONG_RUN + 1},}}")


def _breakable(text: str) -> str:
    """Escaped cell text that may wrap after a path's or name's separators and inside long
    ids, and nowhere else: CSS alone keeps words whole only if the table may overflow."""
    text = _LONG_RUN.sub(lambda m: "\0".join(m[0][i:i + LONG_RUN] for i in range(0, len(m[0]), LONG_RUN)),
                         text)
    return html.escape(_SEPARATOR.sub("\\1\0", text)).replace("\0", "<wbr>")


def _cell(text: str) -> str:
    """A table cell: numbers right-aligned, short tokens (addresses, versions) kept whole."""
    if _NUMBER.fullmatch(text):
        return f"<td class='n'>{html.escape(text)}</td>"
    if len(text) <= 16 and " " not in text:
        return f"<td class='t'>{html.escape(text)}</td>"
    return f"<td>{_breakable(text)}</td>"


def _mb(value: float | None) -> str:
    return "-" if value is None else f"{value / 1e6:,.3f}"


#: What the summary counts that did not become frames, with the report's column titles.
LOSSES = (
    ("unread_bytes", "bytes not read (after an error)"),
    ("truncated_bytes", "bytes in an incomplete last record"),
    ("gap_bytes", "bytes in TCP gaps (never captured)"),
    ("snapped_bytes", "snap length: bodies not captured (bytes cut off)"),
    ("skipped_bytes", "bytes skipped to find a frame"),
    ("tail_bytes", "bytes in an incomplete last frame"),
    ("sasl_bytes", "bytes of raw SASL tokens (authentication, not frames)"),
    ("other_bytes", "bytes of other protocols (see Other protocols)"),
    ("malformed_packets", "malformed packets"),
    ("ip_fragments", "IP fragments (not reassembled)"),
)


def _snaplen_label(facts: dict, label: str) -> str:
    """The snap-length column's title with the snap lengths that cut packets ("snaplen 96: ..."),
    as the captures' headers give them (the summary's ``snap_lengths``)."""
    lengths = sorted({n for r in facts["summary"] for n in r.get("snap_lengths") or ()})
    return label.replace("snap length", "snaplen " + " / ".join(map(str, lengths)), 1) if lengths else label


def _topic_naming_responses() -> str:
    """The responses that name topic IDs, as the report explains them (from the message definitions)."""
    return " / ".join(f"{_api(key)} v{min(versions)}+" if min(versions) else _api(key)
                      for key, versions in sorted(topic_naming_versions().items()))


def _topic_label(topic: dict) -> str:
    """A topic's name, else its ID (a topic only ever addressed by an ID no response named)."""
    if topic["topic"] is not None:
        return str(topic["topic"])
    return f"id:{topic['topic_id']}" if topic.get("topic_id") is not None else "-"


def capture_names(facts: dict) -> tuple[str | None, dict[str, str]]:
    """The captures' common parent folder, and each capture's name relative to it.

    Paths of a run usually share a long prefix (``/data/caps/broker-1/...``); the report
    says it once and shows the rest. A single capture keeps its file name; names that
    are not paths (``*``, Parquet table names) stay as they are.
    """
    names = sorted({r["capture"] for r in facts["summary"] if r["capture"] != "*"}
                   | {e["capture"] for e in facts.get("input_errors", [])})
    folders = [name.split("/")[:-1] for name in names if "/" in name]
    if not folders or len(folders) != len(names):
        return None, {name: name for name in names}
    common = folders[0]
    for parts in folders[1:]:
        while parts[:len(common)] != common:
            common = common[:-1]
    if not common or common == [""]:
        return None, {name: name for name in names}
    parent = "/".join(common)
    return parent, {name: name[len(parent) + 1:] for name in names}


def _shown_capture(names: dict[str, str], capture: str) -> str:
    return names.get(capture, capture)


def _shown_error_input(names: dict[str, str], error: dict) -> str:
    """The capture of an error, and the file its offset is in when that is one file of a capture set."""
    shown = _shown_capture(names, error["capture"])
    file = error.get("file")
    return shown if not file or file == error["capture"] else f"{shown}: {file.rsplit('/', 1)[-1]}"


#: Why a topic's compression can say "mixed" (kproto.arrow.frames.partitions).
MIXED_COMPRESSION = ("\"mixed\": one record set held batches with different codecs (each batch names its own: "
                     "a producer that changed compression.type, or a fetch spanning segments written before and "
                     "after such a change); the other codecs listed are the record sets that used one.")


def sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of every table in the report, shared by Markdown and HTML."""
    out = next_steps.section_rows(facts)
    parent, names = capture_names(facts)
    relative = f" Captures are named relative to {parent}/." if parent else ""
    total: dict[str, Any] = next((r for r in facts["summary"] if r["capture"] == "*"), {})
    input_errors = facts.get("input_errors", [])
    out.append(("Inputs not read completely",
                f"{len(input_errors)} problem(s) in {len({e['capture'] for e in input_errors})} input(s): the "
                "frames before each were analysed; the bytes from it on were not read."
                if input_errors else "Every input was read completely.",
                ["capture", "problem", "byte offset", "reason", "bytes not read"],
                [[_shown_error_input(names, e), e["category"], _fmt(e["offset"]), e["reason"],
                  _fmt(e["unread_bytes"])] for e in input_errors]))
    others = facts.get("other_protocols", [])
    out.append(("Other protocols",
                " ".join(tls_lines(facts) + ["Connections whose bytes are not Kafka (told by their first bytes or "
                                             "their frames: docs/capture.md, 'Other protocols'): counted here, "
                                             "never in frames, clients or readiness."]) if others
                else "Every connection with data is Kafka.",
                ["protocol", "server port", "connections", "packets", "bytes"],
                [[KIND_LABELS.get(r["kind"], r["kind"]), str(r["server_port"]), _fmt(r["connections"]),
                  _fmt(r.get("packets")), _fmt(r["bytes"])] for r in others]))
    losses = [(name, _snaplen_label(facts, label) if name == "snapped_bytes" else label)
              for name, label in LOSSES if any(r.get(name) for r in facts["summary"])]
    out.append(("What is not in frames",
                "Where the bytes and packets of every input went that are not in a frame: only the kinds of loss "
                "that occurred have a column." if losses else "Every byte and packet read is in a frame "
                "(or is traffic other than TCP).",
                ["capture", "file bytes"] + [label for _, label in losses] + ["accounted"],
                [[_shown_capture(names, r["capture"]), _fmt(r.get("file_bytes"))]
                 + [_fmt(r.get(name)) for name, _ in losses]
                 + [_fmt(r.get("accounted"))] for r in facts["summary"]] if losses else []))
    out.append(("Captures and accounting",
                "Every frame read is either decoded or counted as undecodable; every request is paired, "
                "expects no response (acks=0) or is unpaired; every response is paired or unpaired." + relative,
                ["capture", "format", "packets", "connections", "frames", "ok", "undecodable", "paired",
                 "acks=0", "unpaired req", "unpaired resp", "skipped bytes", "accounted"],
                [[_shown_capture(names, r["capture"]), _fmt(r.get("format")), _fmt(r.get("packets")),
                  _fmt(r.get("connections")),
                  _fmt(r.get("frames")), _fmt(r.get("frames_ok")), _fmt(r.get("frames_undecodable")),
                  _fmt(r.get("exchanges_paired")), _fmt(r.get("no_response_expected")),
                  _fmt(r.get("unpaired_requests")), _fmt(r.get("unpaired_responses")),
                  _fmt(r.get("skipped_bytes")), _fmt(r.get("accounted"))] for r in facts["summary"]]))
    _ = total
    out.append(("Clients and their software (KIP-511)",
                "One row per client address and client.id; software from ApiVersions v3+ requests; the likely "
                "library and versions from the KIP-511 name when sent, else from the client's fingerprint "
                "(the versions it asks for, its first request, its default client.id).",
                ["client", "client_id", "software", "version", "likely software", "likely versions",
                 "confidence", "connections", "requests", "APIs used", "removed in 4.x", "first seen (UTC)",
                 "last seen (UTC)"],
                [[_fmt(c["client_ip"]), _fmt(c["client_id"]), _fmt(c["client_software_name"]),
                  _fmt(c["client_software_version"]), _fmt(c.get("likely_software")),
                  _fmt(c.get("likely_versions")), _fmt(c.get("fingerprint_confidence")),
                  _fmt(c["connections"]), _fmt(c["requests"]),
                  _fmt(c["apis"]), _fmt(c["removed_in_4x_requests"]), _when(c["first_seen"]),
                  _when(c["last_seen"])] for c in facts["clients"]]))
    readiness = facts["readiness"]
    out.append(("Kafka 4.x readiness (KIP-896)",
                f"{readiness['removed_in_4x_requests']:,} request(s) from "
                f"{readiness['clients_sending_removed_versions']} client(s) use versions Kafka 4.x removed; "
                f"{readiness['deprecated_requests']:,} deprecated request(s) in all (the count KIP-896 tells "
                "operators to bring to zero before upgrading).",
                ["client", "client_id", "software", "API", "version", "requests", "first seen (UTC)",
                 "last seen (UTC)"],
                [[_fmt(r["client_ip"]), _fmt(r["client_id"]), _fmt(r["software_name"]), r["api_name"],
                  str(r["api_version"]), _fmt(r["requests"]), _when(r["first_seen"]), _when(r["last_seen"])]
                 for r in readiness["removed"]]))
    out.append(("Deprecated versions still served by 4.x",
                "Deprecated by KIP-896 but not removed in 4.x: worth upgrading, not blocking, except on "
                "the 4.x releases that do not serve it (JoinGroup v0-1: 4.0.0, as a real 4.0.0 broker showed).",
                ["client", "client_id", "API", "version", "requests", "not served by"],
                [[_fmt(r["client_ip"]), _fmt(r["client_id"]), r["api_name"], str(r["api_version"]),
                  _fmt(r["requests"]), ", ".join(r["not_served_by_4x"]) or "-"]
                 for r in readiness["deprecated_not_removed"]]))
    out.append(("API versions in use", "Requests per API and version.",
                ["API", "version", "requests", "clients", "deprecated", "removed in 4.x"],
                [[r["api_name"], str(r["api_version"]), _fmt(r["requests"]), _fmt(r["clients"]),
                  _fmt(r["deprecated"]), _fmt(r["removed_in_4x"])] for r in facts["api_versions"]]))
    out.append(("Brokers", "From captured ApiVersions responses: what each broker advertises and the "
                "Kafka release whose table matches.",
                ["broker", "ApiVersions version", "APIs", "release", "inference"],
                [[b["broker"], str(b["api_versions_version"]), str(b["apis"]), _fmt(b["release"]),
                  b["inference"]] for b in facts["brokers"]]))
    out.append(("KIP-511 fallbacks", "ApiVersions requests refused with UNSUPPORTED_VERSION, and the "
                "version the client retried with.",
                ["client", "client_id", "software", "broker", "asked", "broker max", "retried with",
                 "connections"],
                [[_fmt(r["client_ip"]), _fmt(r["client_id"]), _fmt(r["software_name"]), r["broker"],
                  _fmt(r["requested_version"]), _fmt(r["broker_api_versions_max"]), _fmt(r["retry_version"]),
                  _fmt(r["connections"])] for r in facts["kip511_fallbacks"]]))
    out.append(("Invalid client software names", "ClientSoftwareName / Version that break KIP-511's rules.",
                ["client", "client_id", "name", "version", "problems", "broker answer", "requests"],
                [[_fmt(r["client_ip"]), _fmt(r["client_id"]), repr(r["client_software_name"]),
                  repr(r["client_software_version"]), r["software_problems"], _fmt(r["broker_answer"]),
                  _fmt(r["requests"])] for r in facts["invalid_software_names"]]))
    out.append(("Error codes by API", "The first non-zero error code of each response (top level or per "
                "topic / partition).",
                ["API", "error", "code", "responses"],
                [[r["api_name"], r["error_name"], str(r["error_code"]), _fmt(r["responses"])]
                 for r in facts["errors"]]))
    out.append(("Latency per API", "First request byte captured to last response byte captured.",
                ["API", "exchanges", "p50 ms", "p99 ms", "max ms"],
                [[r["api_name"], _fmt(r["exchanges"]), f"{r['p50_ms']:.3f}", f"{r['p99_ms']:.3f}",
                  f"{r['max_ms']:.3f}"] for r in facts["latency"]]))
    unnamed = facts.get("unnamed_topic_ids", [])
    out.append(("Produce and fetch throughput by topic", "Record-set bytes (as sent, compressed) over the "
                "span between the first and last frame of the topic-partition."
                + (f" Topic IDs never named in this capture: {', '.join(unnamed)} — no {_topic_naming_responses()} "
                   "response carrying them was captured, so they are shown as their ID." if unnamed else "")
                + (" " + MIXED_COMPRESSION if any("mixed" in (t["compression"] or "").split(",")
                                                  for t in facts["topics"]) else ""),
                ["topic", "partition", "produce MB", "produce records", "produce MB/s", "fetch MB",
                 "fetch records", "fetch MB/s", "compression"],
                [[_topic_label(t), str(t["partition"]), _mb(t["produce_bytes"]), _fmt(t["produce_records"]),
                  _mb(t["produce_bytes_per_s"]), _mb(t["fetch_bytes"]), _fmt(t["fetch_records"]),
                  _mb(t["fetch_bytes_per_s"]), _fmt(t["compression"])] for t in facts["topics"]]))
    out.append(("Undecodable frames", "Frames whose header or body did not decode, and why.",
                ["direction", "API", "version", "reason", "frames", "first error offset"],
                [["response" if r["direction"] else "request", r["api_name"], _fmt(r["api_version"]),
                  r["status_name"], _fmt(r["frames"]), _fmt(r["first_error_offset"])]
                 for r in facts["undecodable_frames"]]))
    out.append(("Unpaired frames", "Requests without a captured response and responses without a "
                "captured request (acks=0 produce requests expect none).",
                ["status", "API", "exchanges"],
                [[r["pair_status_name"], r["api_name"], _fmt(r["exchanges"])] for r in facts["unpaired"]]))
    return out


def markdown(facts: dict) -> str:
    lines = ["# Kafka traffic report", "",
             f"Generated {facts['generated_at']} by kproto {facts['kproto_version']} "
             f"(Spark {facts['spark_version']}).", ""]
    input_errors = facts.get("input_errors", [])
    if input_errors:
        lines += [f"**Not every input was read completely:** {len({e['capture'] for e in input_errors})} "
                  f"input(s), {sum(e['unread_bytes'] for e in input_errors):,} bytes not read.", ""]
    for line in tls_lines(facts):
        lines += [f"**TLS:** {line}", ""]
    for title, note, header, rows in sections(facts):
        lines += [f"## {title}", "", note, ""]
        if not rows:
            lines += ["None.", ""]
            continue
        lines.append("| " + " | ".join(header) + " |")
        lines.append("|" + "---|" * len(header))
        for row in rows:
            lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- HTML and charts
CHART_LABEL_CHARS = 34   # what fits left of the bars at 12 px


def short_label(label: str, limit: int = CHART_LABEL_CHARS) -> str:
    """``label``, or its start and an ellipsis when it is longer than ``limit`` characters."""
    return label if len(label) <= limit else label[:limit - 1] + "\u2026"


def bar_chart(title: str, labels: list[str], series: list[tuple[str, list[float]]], unit: str = "") -> str:
    """A horizontal bar chart as inline SVG (one bar per label and series)."""
    if not labels:
        return ""
    colors = ["#3b6ea5", "#e07b39", "#5aa469", "#b04a5a"]
    peak = max((v for _, values in series for v in values if v), default=1) or 1
    bar, gap, label_width, width = 14, 6, 260, 760
    group = bar * len(series) + gap
    height = 40 + group * len(labels) + 20 * len(series)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" '
             f'aria-label="{html.escape(title)}">',
             f'<text x="0" y="16" font-weight="bold" font-size="14">{html.escape(title)}</text>']
    for i, label in enumerate(labels):
        y = 30 + i * group
        parts.append(f'<text x="{label_width - 6}" y="{y + bar * len(series) / 2 + 4}" text-anchor="end" '
                     f'font-size="12"><title>{html.escape(label)}</title>{html.escape(short_label(label))}</text>')
        for j, (_name, values) in enumerate(series):
            value = values[i] or 0
            length = (width - label_width - 110) * value / peak
            parts.append(f'<rect x="{label_width}" y="{y + j * bar}" width="{max(length, 0.5):.1f}" '
                         f'height="{bar - 2}" fill="{colors[j % len(colors)]}"/>')
            parts.append(f'<text x="{label_width + length + 4:.1f}" y="{y + j * bar + bar - 4}" font-size="11">'
                         f'{value:,.3g}{html.escape(unit)}</text>')
    y = 30 + group * len(labels) + 6
    for j, (name, _values) in enumerate(series):
        parts.append(f'<rect x="{label_width + j * 150}" y="{y}" width="10" height="10" '
                     f'fill="{colors[j % len(colors)]}"/><text x="{label_width + j * 150 + 14}" y="{y + 9}" '
                     f'font-size="11">{html.escape(name)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def charts(facts: dict) -> dict[str, str]:
    """Chart SVGs by the title of the section they illustrate."""
    versions = facts["api_versions"]
    latency = facts["latency"]
    topics = facts["topics"]
    summary = [r for r in facts["summary"] if r["capture"] != "*"]
    clients = facts["clients"]
    _parent, names = capture_names(facts)
    return {
        "API versions in use": bar_chart(
            "Requests per API version", [f"{r['api_name']} v{r['api_version']}" + (" (removed in 4.x)"
                                                                                 if r["removed_in_4x"] else "")
                                         for r in versions], [("requests", [r["requests"] for r in versions])]),
        "Latency per API": bar_chart("Latency per API (ms)", [r["api_name"] for r in latency],
                                     [("p50", [r["p50_ms"] for r in latency]),
                                      ("p99", [r["p99_ms"] for r in latency])], " ms"),
        "Produce and fetch throughput by topic": bar_chart(
            "Bytes per topic-partition (MB)", [f"{_topic_label(t)}-{t['partition']}" for t in topics],
            [("produce", [t["produce_bytes"] / 1e6 for t in topics]),
             ("fetch", [t["fetch_bytes"] / 1e6 for t in topics])], " MB"),
        "Clients and their software (KIP-511)": bar_chart(
            "Requests per client",
            [f"{c['client_id']} ({c['client_software_name'] or c.get('likely_software') or '?'})" for c in clients],
            [("requests", [c["requests"] for c in clients]),
             ("removed in 4.x", [c["removed_in_4x_requests"] for c in clients])]),
        "Captures and accounting": bar_chart(
            "Frames per capture", [_shown_capture(names, r["capture"]) for r in summary],
            [("decoded", [r.get("frames_ok") or 0 for r in summary]),
             ("undecodable", [r.get("frames_undecodable") or 0 for r in summary])]),
    }


_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; padding: 0 1em; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; max-width: 100%; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { overflow-wrap: normal; }
svg { max-width: 100%; height: auto; }
.scroll { overflow-x: auto; }
th { background: #f0f3f7; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.t { white-space: nowrap; }
.note { color: #555; }
.warn { background: #fff4e5; border-left: 4px solid #e07b39; padding: 0.5em 1em; }
"""


def html_report(facts: dict) -> str:
    figure = charts(facts)
    readiness = facts["readiness"]
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Kafka traffic report</title>",
             f"<style>{_STYLE}</style></head><body>", "<h1>Kafka traffic report</h1>",
             f"<p class='note'>Generated {html.escape(facts['generated_at'])} by kproto "
             f"{html.escape(facts['kproto_version'])} (Spark {html.escape(facts['spark_version'])}).</p>"]
    input_errors = facts.get("input_errors", [])
    if input_errors:
        unread = sum(e["unread_bytes"] for e in input_errors)
        parts.append(f"<p class='warn'><b>Not every input was read completely:</b> "
                     f"{len({e['capture'] for e in input_errors})} input(s), {unread:,} bytes not read; "
                     "see the first table.</p>")
    for line in tls_lines(facts):
        parts.append(f"<p class='warn'><b>TLS:</b> {html.escape(line)}</p>")
    if readiness["removed_in_4x_requests"]:
        parts.append(f"<p class='warn'><b>Not ready for Kafka 4.x:</b> {readiness['removed_in_4x_requests']:,} "
                     f"request(s) from {readiness['clients_sending_removed_versions']} client(s) use API versions "
                     "Kafka 4.x removed (KIP-896).</p>")
    for title, note, header, rows in sections(facts):
        parts.append(f"<h2>{html.escape(title)}</h2><p class='note'>{html.escape(note)}</p>")
        if title in figure and rows:
            parts.append(figure[title])
        if not rows:
            parts.append("<p>None.</p>")
            continue
        parts.append("<div class='scroll'><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            cells = "".join(_cell(c) for c in row)
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</table></div>")
    parts.append("</body></html>")
    return "\n".join(parts)
