"""The report's "Next steps": what to do about each client and broker not ready for Kafka 4.x.

For a client that sent versions Kafka 4.x removed (KIP-896): the cause - the
library release is too old, or it is pinned (``api_version``) below what the
fingerprint says the library negotiates by itself - and the fix (the first
recorded release of that library that sends no removed version). Ranked by
request volume. For a broker: the release its ApiVersions table matches, and
whether a 4.x client (which sends none of the removed versions) finds every
API it needs.
"""

from __future__ import annotations

from typing import Any

from kproto import fingerprint as FP
from kproto import versions as kv

# What a consumer / producer client cannot do without (a 4.x client's baseline must meet the broker's range).
CLIENT_APIS = ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetCommit", "OffsetFetch", "FindCoordinator",
               "JoinGroup", "Heartbeat", "LeaveGroup", "SyncGroup", "ApiVersions")


def client_steps(clients: list[dict], removed: list[dict]) -> list[dict]:
    """One row per client that sent removed versions, most requests first."""
    removed_by_client: dict[tuple, list[str]] = {}
    for r in removed:
        removed_by_client.setdefault((r["client_ip"], r["client_id"]), []).append(
            f"{r['api_name']} v{r['api_version']}")
    table = FP.table()
    steps = []
    for c in clients:
        key = (c["client_ip"], c["client_id"])
        if not c["removed_in_4x_requests"] or key not in removed_by_client:
            continue
        verdict = table.classify(c["client_id"], FP.api_pairs(c.get("api_order") or ()),
                                 c["client_software_name"], c["client_software_version"],
                                 c.get("api_versions_per_connection"))
        cause, fix = table.advice(verdict, removed_by_client[key])
        steps.append({"client_ip": c["client_ip"], "client_id": c["client_id"], "requests": c["requests"],
                      "removed_in_4x_requests": c["removed_in_4x_requests"], "software": verdict.library,
                      "versions": verdict.range_text, "confidence": verdict.confidence, "cause": cause, "fix": fix})
    return sorted(steps, key=lambda s: (-(s["requests"] or 0), s["client_ip"] or "", s["client_id"] or ""))


def broker_steps(brokers: list[dict]) -> list[dict]:
    """Each broker's inferred release and whether 4.x clients can talk to it (and if not, why)."""
    steps = []
    for b in brokers:
        ranges = {kv.api_key_of(name): tuple(int(v) for v in span.split("-")) for name, span in b["ranges"].items()
                  if not name.startswith("UNKNOWN(")}
        try:
            kv.negotiate(None, ranges, required=CLIENT_APIS, kafka_4x_baseline=True)
            ready, why = True, "every API a client needs has a version Kafka 4.x clients send"
        except kv.ObsoleteBrokerVersion as exc:
            ready, why = False, f"{exc}: upgrade the broker to 2.1 or later before the clients go to 4.x"
        release = b["release"] or ", ".join(b["exact"] or b["closest"]) or "unknown"
        steps.append({"broker": b["broker"], "release": release, "talks_to_4x_clients": ready, "why": why})
    return steps


def section_rows(facts: dict[str, Any]) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The two "Next steps" tables (clients, brokers), for the top of the report."""
    steps = facts.get("next_steps", {"clients": [], "brokers": []})
    clients = steps["clients"]
    out = [("Next steps: clients not ready for Kafka 4.x",
            f"{len(clients)} client(s) send versions Kafka 4.x removed, most requests first: the likely "
            "library (KIP-511 name, or the fingerprint), why, and what to do." if clients else
            "No client sends a version Kafka 4.x removed.",
            ["client", "client_id", "requests", "removed in 4.x", "likely software", "versions", "confidence",
             "cause", "fix"],
            [[_text(s["client_ip"]), _text(s["client_id"]), f"{s['requests']:,}", f"{s['removed_in_4x_requests']:,}",
              _text(s["software"]), _text(s["versions"]), _text(s["confidence"]), s["cause"], s["fix"]]
             for s in clients])]
    brokers = steps["brokers"]
    out.append(("Next steps: brokers",
                "The release each broker's ApiVersions table matches, and whether Kafka 4.x clients can use it.",
                ["broker", "release", "talks to 4.x clients", "why"],
                [[b["broker"], b["release"], "yes" if b["talks_to_4x_clients"] else "no", b["why"]]
                 for b in brokers]))
    mismatches = [c for c in facts["clients"] if c.get("fingerprint_mismatch")]
    if mismatches:
        out.append(("Next steps: software names the traffic contradicts",
                    "The KIP-511 name wins in the clients table; the wire's fingerprint says otherwise.",
                    ["client", "client_id", "what each says"],
                    [[_text(c["client_ip"]), _text(c["client_id"]), c["fingerprint_mismatch"]] for c in mismatches]))
    return out


def _text(value: Any) -> str:
    return "" if value is None else str(value)
