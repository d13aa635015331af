"""The report's tables as text: (title, note, header, rows) of every section, and the Markdown report.

:func:`sections` turns the facts of kproto/analyze/spark/report.py into the tables both the
Markdown (:func:`markdown`) and the HTML (kproto/analyze/spark/report_html.py) show, in the
order they show them.
"""

from __future__ import annotations

from typing import Any

from kproto import versions as kv
from kproto.analyze.spark import next_steps
from kproto.arrow.topic_names import topic_naming_versions


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


#: How the report names a kind of connection that is not Kafka.
KIND_LABELS = {"tls": "TLS", "zookeeper": "ZooKeeper", "http": "HTTP", "other": "another protocol"}


def tls_lines(facts: dict) -> list[str]:
    """One sentence per port whose connections are TLS: Kafka there is out of reach without keys."""
    lines = []
    for r in facts.get("other_protocols", []):
        if r["kind"] == "tls":
            many = r["connections"] != 1
            lines.append(
                f"{r['connections']:,} connection{'s' if many else ''} on port {r['server_port']} "
                f"{'are' if many else 'is'} TLS ({_fmt(r['bytes'])} bytes): their Kafka traffic cannot be "
                "read without keys."
            )
    return lines


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
    return " / ".join(
        f"{kv.api_name(key)} v{min(versions)}+" if min(versions) else kv.api_name(key)
        for key, versions in sorted(topic_naming_versions().items())
    )


def topic_label(topic: dict) -> str:
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
    names = sorted(
        {r["capture"] for r in facts["summary"] if r["capture"] != "*"}
        | {e["capture"] for e in facts.get("input_errors", [])}
    )
    folders = [name.split("/")[:-1] for name in names if "/" in name]
    if not folders or len(folders) != len(names):
        return None, {name: name for name in names}
    common = folders[0]
    for parts in folders[1:]:
        while parts[: len(common)] != common:
            common = common[:-1]
    if not common or common == [""]:
        return None, {name: name for name in names}
    parent = "/".join(common)
    return parent, {name: name[len(parent) + 1 :] for name in names}


def shown_capture(names: dict[str, str], capture: str) -> str:
    return names.get(capture, capture)


def _shown_error_input(names: dict[str, str], error: dict) -> str:
    """The capture of an error, and the file its offset is in when that is one file of a capture set."""
    shown = shown_capture(names, error["capture"])
    file = error.get("file")
    return shown if not file or file == error["capture"] else f"{shown}: {file.rsplit('/', 1)[-1]}"


#: Why a topic's compression can say "mixed" (kproto.arrow.frames.partitions).
MIXED_COMPRESSION = (
    '"mixed": one record set held batches with different codecs (each batch names its own: '
    "a producer that changed compression.type, or a fetch spanning segments written before and "
    "after such a change); the other codecs listed are the record sets that used one."
)


def sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """(title, note, header, rows) of every table in the report, shared by Markdown and HTML."""
    return next_steps.section_rows(facts) + input_sections(facts) + client_sections(facts) + traffic_sections(facts)


def input_sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The inputs: what was not read, what is not Kafka, what is not in frames, and the accounting."""
    out = []
    parent, names = capture_names(facts)
    relative = f" Captures are named relative to {parent}/." if parent else ""
    input_errors = facts.get("input_errors", [])
    out.append(
        (
            "Inputs not read completely",
            f"{len(input_errors)} problem(s) in {len({e['capture'] for e in input_errors})} input(s): the "
            "frames before each were analysed; the bytes from it on were not read."
            if input_errors
            else "Every input was read completely.",
            ["capture", "problem", "byte offset", "reason", "bytes not read"],
            [
                [_shown_error_input(names, e), e["category"], _fmt(e["offset"]), e["reason"], _fmt(e["unread_bytes"])]
                for e in input_errors
            ],
        )
    )
    others = facts.get("other_protocols", [])
    out.append(
        (
            "Other protocols",
            " ".join(
                tls_lines(facts)
                + [
                    "Connections whose bytes are not Kafka (told by their first bytes or "
                    "their frames: docs/capture.md, 'Other protocols'): counted here, "
                    "never in frames, clients or readiness."
                ]
            )
            if others
            else "Every connection with data is Kafka.",
            ["protocol", "server port", "connections", "packets", "bytes"],
            [
                [
                    KIND_LABELS.get(r["kind"], r["kind"]),
                    str(r["server_port"]),
                    _fmt(r["connections"]),
                    _fmt(r.get("packets")),
                    _fmt(r["bytes"]),
                ]
                for r in others
            ],
        )
    )
    losses = [
        (name, _snaplen_label(facts, label) if name == "snapped_bytes" else label)
        for name, label in LOSSES
        if any(r.get(name) for r in facts["summary"])
    ]
    out.append(
        (
            "What is not in frames",
            "Where the bytes and packets of every input went that are not in a frame: only the kinds of loss "
            "that occurred have a column."
            if losses
            else "Every byte and packet read is in a frame (or is traffic other than TCP).",
            ["capture", "file bytes"] + [label for _, label in losses] + ["accounted"],
            [
                [shown_capture(names, r["capture"]), _fmt(r.get("file_bytes"))]
                + [_fmt(r.get(name)) for name, _ in losses]
                + [_fmt(r.get("accounted"))]
                for r in facts["summary"]
            ]
            if losses
            else [],
        )
    )
    out.append(_accounting_section(facts, names, relative))
    return out


def _accounting_section(
    facts: dict, names: dict[str, str], relative: str
) -> tuple[str, str, list[str], list[list[str]]]:
    """Each capture's accounting: frames decoded or not, requests and responses paired or not."""
    return (
        "Captures and accounting",
        "Every frame read is either decoded or counted as undecodable; every request is paired, "
        "expects no response (acks=0) or is unpaired; every response is paired or unpaired." + relative,
        [
            "capture",
            "format",
            "packets",
            "connections",
            "frames",
            "ok",
            "undecodable",
            "paired",
            "acks=0",
            "unpaired req",
            "unpaired resp",
            "skipped bytes",
            "accounted",
        ],
        [
            [
                shown_capture(names, r["capture"]),
                _fmt(r.get("format")),
                _fmt(r.get("packets")),
                _fmt(r.get("connections")),
                _fmt(r.get("frames")),
                _fmt(r.get("frames_ok")),
                _fmt(r.get("frames_undecodable")),
                _fmt(r.get("exchanges_paired")),
                _fmt(r.get("no_response_expected")),
                _fmt(r.get("unpaired_requests")),
                _fmt(r.get("unpaired_responses")),
                _fmt(r.get("skipped_bytes")),
                _fmt(r.get("accounted")),
            ]
            for r in facts["summary"]
        ],
    )


def client_sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The clients and brokers: software, Kafka 4.x readiness, API versions, brokers, KIP-511."""
    out = []
    out.append(
        (
            "Clients and their software (KIP-511)",
            "One row per client address and client.id; software from ApiVersions v3+ requests; the likely "
            "library and versions from the KIP-511 name when sent, else from the client's fingerprint "
            "(the versions it asks for, its first request, its default client.id).",
            [
                "client",
                "client_id",
                "software",
                "version",
                "likely software",
                "likely versions",
                "confidence",
                "connections",
                "requests",
                "APIs used",
                "removed in 4.x",
                "first seen (UTC)",
                "last seen (UTC)",
            ],
            [
                [
                    _fmt(c["client_ip"]),
                    _fmt(c["client_id"]),
                    _fmt(c["client_software_name"]),
                    _fmt(c["client_software_version"]),
                    _fmt(c.get("likely_software")),
                    _fmt(c.get("likely_versions")),
                    _fmt(c.get("fingerprint_confidence")),
                    _fmt(c["connections"]),
                    _fmt(c["requests"]),
                    _fmt(c["apis"]),
                    _fmt(c["removed_in_4x_requests"]),
                    _when(c["first_seen"]),
                    _when(c["last_seen"]),
                ]
                for c in facts["clients"]
            ],
        )
    )
    readiness = facts["readiness"]
    out.append(
        (
            "Kafka 4.x readiness (KIP-896)",
            f"{readiness['removed_in_4x_requests']:,} request(s) from "
            f"{readiness['clients_sending_removed_versions']} client(s) use versions Kafka 4.x removed; "
            f"{readiness['deprecated_requests']:,} deprecated request(s) in all (the count KIP-896 tells "
            "operators to bring to zero before upgrading).",
            ["client", "client_id", "software", "API", "version", "requests", "first seen (UTC)", "last seen (UTC)"],
            [
                [
                    _fmt(r["client_ip"]),
                    _fmt(r["client_id"]),
                    _fmt(r["software_name"]),
                    r["api_name"],
                    str(r["api_version"]),
                    _fmt(r["requests"]),
                    _when(r["first_seen"]),
                    _when(r["last_seen"]),
                ]
                for r in readiness["removed"]
            ],
        )
    )
    out.append(
        (
            "Deprecated versions still served by 4.x",
            "Deprecated by KIP-896 but not removed in 4.x: worth upgrading, not blocking, except on "
            "the 4.x releases that do not serve it (JoinGroup v0-1: 4.0.0, as a real 4.0.0 broker showed).",
            ["client", "client_id", "API", "version", "requests", "not served by"],
            [
                [
                    _fmt(r["client_ip"]),
                    _fmt(r["client_id"]),
                    r["api_name"],
                    str(r["api_version"]),
                    _fmt(r["requests"]),
                    ", ".join(r["not_served_by_4x"]) or "-",
                ]
                for r in readiness["deprecated_not_removed"]
            ],
        )
    )
    return out + _version_and_broker_sections(facts)


def _version_and_broker_sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The API versions in use, the brokers, KIP-511 fallbacks and invalid client software names."""
    out = []
    out.append(
        (
            "API versions in use",
            "Requests per API and version.",
            ["API", "version", "requests", "clients", "deprecated", "removed in 4.x"],
            [
                [
                    r["api_name"],
                    str(r["api_version"]),
                    _fmt(r["requests"]),
                    _fmt(r["clients"]),
                    _fmt(r["deprecated"]),
                    _fmt(r["removed_in_4x"]),
                ]
                for r in facts["api_versions"]
            ],
        )
    )
    out.append(
        (
            "Brokers",
            "From captured ApiVersions responses: what each broker advertises and the "
            "Kafka release whose table matches.",
            ["broker", "ApiVersions version", "APIs", "release", "inference"],
            [
                [b["broker"], str(b["api_versions_version"]), str(b["apis"]), _fmt(b["release"]), b["inference"]]
                for b in facts["brokers"]
            ],
        )
    )
    out.append(
        (
            "KIP-511 fallbacks",
            "ApiVersions requests refused with UNSUPPORTED_VERSION, and the version the client retried with.",
            ["client", "client_id", "software", "broker", "asked", "broker max", "retried with", "connections"],
            [
                [
                    _fmt(r["client_ip"]),
                    _fmt(r["client_id"]),
                    _fmt(r["software_name"]),
                    r["broker"],
                    _fmt(r["requested_version"]),
                    _fmt(r["broker_api_versions_max"]),
                    _fmt(r["retry_version"]),
                    _fmt(r["connections"]),
                ]
                for r in facts["kip511_fallbacks"]
            ],
        )
    )
    out.append(
        (
            "Invalid client software names",
            "ClientSoftwareName / Version that break KIP-511's rules.",
            ["client", "client_id", "name", "version", "problems", "broker answer", "requests"],
            [
                [
                    _fmt(r["client_ip"]),
                    _fmt(r["client_id"]),
                    repr(r["client_software_name"]),
                    repr(r["client_software_version"]),
                    r["software_problems"],
                    _fmt(r["broker_answer"]),
                    _fmt(r["requests"]),
                ]
                for r in facts["invalid_software_names"]
            ],
        )
    )
    return out


def traffic_sections(facts: dict) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The traffic: errors, latency, throughput per topic, frames that did not decode or pair."""
    out = []
    out.append(
        (
            "Error codes by API",
            "The first non-zero error code of each response (top level or per topic / partition).",
            ["API", "error", "code", "responses"],
            [[r["api_name"], r["error_name"], str(r["error_code"]), _fmt(r["responses"])] for r in facts["errors"]],
        )
    )
    out.append(
        (
            "Latency per API",
            "First request byte captured to last response byte captured.",
            ["API", "exchanges", "p50 ms", "p99 ms", "max ms"],
            [
                [r["api_name"], _fmt(r["exchanges"]), f"{r['p50_ms']:.3f}", f"{r['p99_ms']:.3f}", f"{r['max_ms']:.3f}"]
                for r in facts["latency"]
            ],
        )
    )
    unnamed = facts.get("unnamed_topic_ids", [])
    out.append(
        (
            "Produce and fetch throughput by topic",
            "Record-set bytes (as sent, compressed) over the "
            "span between the first and last frame of the topic-partition."
            + (
                f" Topic IDs never named in this capture: {', '.join(unnamed)} — no {_topic_naming_responses()} "
                "response carrying them was captured, so they are shown as their ID."
                if unnamed
                else ""
            )
            + (
                " " + MIXED_COMPRESSION
                if any("mixed" in (t["compression"] or "").split(",") for t in facts["topics"])
                else ""
            ),
            [
                "topic",
                "partition",
                "produce MB",
                "produce records",
                "produce MB/s",
                "fetch MB",
                "fetch records",
                "fetch MB/s",
                "compression",
            ],
            [
                [
                    topic_label(t),
                    str(t["partition"]),
                    _mb(t["produce_bytes"]),
                    _fmt(t["produce_records"]),
                    _mb(t["produce_bytes_per_s"]),
                    _mb(t["fetch_bytes"]),
                    _fmt(t["fetch_records"]),
                    _mb(t["fetch_bytes_per_s"]),
                    _fmt(t["compression"]),
                ]
                for t in facts["topics"]
            ],
        )
    )
    out.append(
        (
            "Undecodable frames",
            "Frames whose header or body did not decode, and why.",
            ["direction", "API", "version", "reason", "frames", "first error offset"],
            [
                [
                    "response" if r["direction"] else "request",
                    r["api_name"],
                    _fmt(r["api_version"]),
                    r["status_name"],
                    _fmt(r["frames"]),
                    _fmt(r["first_error_offset"]),
                ]
                for r in facts["undecodable_frames"]
            ],
        )
    )
    out.append(
        (
            "Unpaired frames",
            "Requests without a captured response and responses without a "
            "captured request (acks=0 produce requests expect none).",
            ["status", "API", "exchanges"],
            [[r["pair_status_name"], r["api_name"], _fmt(r["exchanges"])] for r in facts["unpaired"]],
        )
    )
    return out


def markdown(facts: dict) -> str:
    lines = [
        "# Kafka traffic report",
        "",
        f"Generated {facts['generated_at']} by kproto {facts['kproto_version']} (Spark {facts['spark_version']}).",
        "",
    ]
    input_errors = facts.get("input_errors", [])
    if input_errors:
        lines += [
            f"**Not every input was read completely:** {len({e['capture'] for e in input_errors})} "
            f"input(s), {sum(e['unread_bytes'] for e in input_errors):,} bytes not read.",
            "",
        ]
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
