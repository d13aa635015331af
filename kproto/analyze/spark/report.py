"""The analysis report: facts gathered with Spark, written as JSON, Markdown and HTML.

:func:`collect_facts` (Spark) and :func:`collect_facts_arrow` (pyarrow, in the driver) run the
queries of kproto/analyze/spark/report_facts.py over the output tables and return a plain dict (only
numbers, strings, lists); :func:`write_report`
turns that dict into ``report.json``, ``report.md`` and ``report.html``
(kproto/analyze/spark/report_sections.py and kproto/analyze/spark/report_html.py; charts are
inline SVG: the file needs no network and no JavaScript).
"""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import Any

from kproto import versions as kv
from kproto._common.api_keys import ApiKey
from kproto._version import __version__
from kproto.analyze.spark import next_steps, report_facts
from kproto.analyze.spark.report_html import html_report
from kproto.analyze.spark.report_sections import markdown

API_VERSIONS = int(ApiKey.API_VERSIONS)  # a plain int: Spark and Arrow expressions take it


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
    return data.get("error_code"), {
        k["api_key"]: (k["min_version"], k["max_version"]) for k in data.get("api_keys") or []
    }


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


def collect_facts_arrow(
    tables: dict[str, Any],
    summary: list[dict],
    input_errors: list[dict] | None = None,
    spark_version: str | None = None,
) -> dict:
    """The facts of :func:`collect_facts` from pyarrow Tables held in the driver (frames, exchanges,
    connections, clients, topics), without a Spark job."""
    return _finish(report_facts.run_arrow(tables), summary, input_errors, spark_version)


def _finish(
    raw: dict[str, list[dict]], summary: list[dict], input_errors: list[dict] | None, spark_version: str | None
) -> dict:
    """The facts from the raw rows either engine gathered."""
    facts: dict[str, Any] = {
        "generated_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "kproto_version": __version__,
        "spark_version": spark_version,
        "summary": [
            dict(r, first_seen=_iso(r.get("first_ts_ns")), last_seen=_iso(r.get("last_ts_ns"))) for r in summary
        ],
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
    for r in deprecated:  # "not removed" holds for most 4.x releases: name those that refuse it
        r["not_served_by_4x"] = list(kv.version_info(r["api_key"], r["api_version"]).not_served_by_4x)
    facts["readiness"] = {
        "removed_in_4x_requests": sum(r["requests"] for r in removed),
        "deprecated_requests": sum(r["requests"] for r in removed + deprecated),
        "clients_sending_removed_versions": len({(r["client_ip"], r["client_id"]) for r in removed}),
        "removed": removed,
        "deprecated_not_removed": deprecated,
    }

    facts["brokers"] = _brokers(raw["api_responses"])
    facts["next_steps"] = {
        "clients": next_steps.client_steps(clients, removed),
        "brokers": next_steps.broker_steps(facts["brokers"]),
    }

    facts["kip511_fallbacks"] = _fallbacks(raw["fallbacks"], software)

    facts["invalid_software_names"] = raw["invalid_software_names"]
    facts["errors"] = [dict(r, api_name=_api(r["api_key"])) for r in raw["errors"]]
    facts["latency"] = [
        {
            "api_key": r["api_key"],
            "api_name": _api(r["api_key"]),
            "exchanges": r["exchanges"],
            "p50_ms": r["p50_ns"] / 1e6,
            "p99_ms": r["p99_ns"] / 1e6,
            "max_ms": r["max_ns"] / 1e6,
        }
        for r in raw["latency"]
    ]

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


def _fallbacks(rows: list[dict], software: dict[tuple, str | None]) -> list[dict]:
    """KIP-511 fallbacks: ApiVersions refused with UNSUPPORTED_VERSION, and the retry that followed."""
    fallbacks = []
    for r in rows:
        _code, ranges = _ranges(r.pop("body"))
        r["broker_api_versions_max"] = ranges.get(API_VERSIONS, (None, None))[1]
        r["broker"] = _address(r.pop("server_ip"), r.pop("server_port"))
        r["requested_version"] = r.pop("api_version")
        r["software_name"] = software.get((r["client_ip"], r["client_id"]))
        fallbacks.append(r)
    return sorted(
        fallbacks,
        key=lambda r: (
            r["client_ip"] or "",
            r["client_id"] or "",
            r["broker"],
            r["requested_version"] or 0,
            r["retry_version"] if r["retry_version"] is not None else -1,
        ),
    )


def _brokers(api_responses: list[dict]) -> list[dict]:
    """Brokers: what their ApiVersions responses advertise, and the release that matches."""
    brokers = []
    seen = set()
    for r in sorted(
        api_responses, key=lambda r: (r["server_ip"] or "", r["server_port"] or 0, r["api_version"], r["body"] or "")
    ):
        code, ranges = _ranges(r["body"])
        if code != 0 or not ranges:
            continue
        key = (r["server_ip"], r["server_port"], tuple(sorted(ranges.items())))
        if key in seen:
            continue
        seen.add(key)
        match = kv.infer_release(ranges)
        brokers.append(
            {
                "broker": _address(r["server_ip"], r["server_port"]),
                "api_versions_version": r["api_version"],
                "apis": len(ranges),
                "release": match.release,
                "exact": list(match.exact),
                "closest": list(match.closest),
                "inference": match.describe(),
                "ranges": {_api(k): f"{lo}-{hi}" for k, (lo, hi) in sorted(ranges.items())},
            }
        )
    return sorted(brokers, key=lambda b: b["broker"])


# ---------------------------------------------------------------- writing
def write_report(facts: dict, out: Path) -> dict[str, Path]:
    """report.json, report.md and report.html under ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "report.json", "md": out / "report.md", "html": out / "report.html"}
    paths["json"].write_text(json.dumps(facts, indent=2, sort_keys=True, default=str) + "\n")
    paths["md"].write_text(markdown(facts))
    paths["html"].write_text(html_report(facts))
    return paths
