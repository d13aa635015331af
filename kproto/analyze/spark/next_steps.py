"""The report's "Next steps": what to do about each client and broker not ready for Kafka 4.x.

For a client that sent versions Kafka 4.x removed (KIP-896): the likely library (its
KIP-511 name, or the fingerprint of kproto.analyze.fingerprint, a guess worded as one), the cause -
the release is too old, or the library's own version setting pins it low - what real 4.x
brokers did with such a client (kproto.analyze.client_recordings), and the fix: the library's own
setting, or its first recorded release that works on 4.x. Ranked by request volume, with
the brokers each client sent requests to. Versions only some 4.x releases refuse (JoinGroup
v0-v1: 4.0.0) are listed apart, with the first 4.x release that serves them. For a broker:
the release its ApiVersions table matches, whether a 4.x client (which sends none of the
removed versions) finds every API it needs, and its own path to 4.x (through KRaft when it
runs ZooKeeper mode), every step read from kproto's tables.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from kproto import versions as kv
from kproto.analyze import fingerprint as FP
from kproto.schema._docs import field_facts

# What a consumer / producer client cannot do without (a 4.x client's baseline must meet the broker's range).
CLIENT_APIS = (
    "Produce",
    "Fetch",
    "ListOffsets",
    "Metadata",
    "OffsetCommit",
    "OffsetFetch",
    "FindCoordinator",
    "JoinGroup",
    "Heartbeat",
    "LeaveGroup",
    "SyncGroup",
    "ApiVersions",
)


def client_steps(clients: list[dict], removed: list[dict]) -> list[dict]:
    """One row per client that sent removed versions, most requests first."""
    removed_by_client: dict[tuple, list[str]] = {}
    for r in removed:
        removed_by_client.setdefault((r["client_ip"], r["client_id"]), []).append(
            f"{r['api_name']} v{r['api_version']}"
        )
    table = FP.table()
    steps = []
    for c in clients:
        key = (c["client_ip"], c["client_id"])
        if not c["removed_in_4x_requests"] or key not in removed_by_client:
            continue
        verdict = table.classify(
            c["client_id"],
            FP.api_pairs(c.get("api_order") or ()),
            c["client_software_name"],
            c["client_software_version"],
            c.get("api_versions_per_connection"),
        )
        advice = table.advice(verdict, removed_by_client[key])
        software = " or ".join((verdict.library, *verdict.alternatives)) if verdict.library else None
        versions = verdict.range_text
        sent = sorted({s for s in c.get("client_software") or () if s})
        if len({s.split("/", 1)[0] for s in sent}) > 1:
            # Programs sharing a client.id: the row names each; which one sends these is not known.
            software, versions = " + ".join(sent), None
            advice["cause"] = f"programs sharing this client.id sent {', '.join(sent)}: one of them " + advice["cause"]
        steps.append(
            {
                "client_ip": c["client_ip"],
                "client_id": c["client_id"],
                "requests": c["requests"],
                "removed_in_4x_requests": c["removed_in_4x_requests"],
                "software": software,
                "brokers": list(c.get("brokers") or ()),
                "versions": versions,
                "confidence": verdict.confidence,
                **advice,
            }
        )
    return sorted(steps, key=lambda s: (-(s["requests"] or 0), s["client_ip"] or "", s["client_id"] or ""))


def partly_served(deprecated: list[dict]) -> list[dict]:
    """Versions some 4.x releases refuse and others serve (JoinGroup v0-v1: 4.0.0 only), per client:
    the releases that refuse them and the first 4.x release that serves them (kproto.versions)."""
    rows = []
    for r in deprecated:
        refusing = list(r.get("not_served_by_4x") or ())
        if not refusing:
            continue
        after = kv.RELEASES.index(refusing[-1])
        serving = [
            release
            for release in kv.version_info(r["api_key"], r["api_version"]).releases
            if kv.RELEASES.index(release) > after
        ]
        rows.append(
            {
                "client_ip": r["client_ip"],
                "client_id": r["client_id"],
                "version": f"{r['api_name']} v{r['api_version']}",
                "requests": r["requests"],
                "refused_by": ", ".join(refusing),
                "fix": (
                    f"on 4.x, run {kv.RECORDED_FROM.get(serving[0], serving[0])} or later (recorded serving "
                    f"it), not {', '.join(refusing)}; or upgrade the client"
                    if serving
                    else "upgrade the client"
                ),
            }
        )
    return rows


def broker_steps(brokers: list[dict]) -> list[dict]:
    """Each broker's inferred release and whether 4.x clients can talk to it (and if not, why)."""
    steps = []
    for b in brokers:
        ranges = {
            kv.api_key_of(name): tuple(int(v) for v in span.split("-"))
            for name, span in b["ranges"].items()
            if not name.startswith("UNKNOWN(")
        }
        try:
            kv.negotiate(None, ranges, required=CLIENT_APIS, kafka_4x_baseline=True)
            ready, why = True, "every API a client needs has a version Kafka 4.x clients send"
        except kv.ObsoleteBrokerVersion as exc:
            ready, why = False, f"{exc}: upgrade the broker to 2.1 or later before the clients go to 4.x"
        release = b["release"] or ", ".join(b["exact"] or b["closest"]) or "unknown"
        steps.append(
            {
                "broker": b["broker"],
                "release": release,
                "talks_to_4x_clients": ready,
                "why": why,
                "path_to_4x": path_to_4x(b["release"] or (b["exact"] or b["closest"] or [None])[0], set(ranges)),
            }
        )
    return steps


@cache
def _zookeeper_facts() -> tuple[tuple[str, ...], str, str, str]:
    """From kproto's tables: the ZooKeeper-only APIs (by name), the last release whose brokers
    advertise them (ZooKeeper mode's last release), the first 4.x release, and the first
    release whose ZooKeeper brokers take a LeaderAndIsr from a KRaft controller (the version
    that added isKRaftController): where the migration to KRaft can start."""
    zookeeper = [info for info in kv.api_table() if info.removed_source == "ZooKeeper-only"]
    with_zookeeper = [
        r
        for r in kv.RELEASES
        if any(i.api_key in kv.release_table(r) or i.api_key in (kv.zookeeper_mode_table(r) or {}) for i in zookeeper)
    ]
    first_4x = next(r for r in kv.RELEASES if int(r.split(".")[0]) >= 4)
    kraft_version = min(field_facts("LeaderAndIsrRequest")[None]["is_k_raft_controller"].versions)
    leader_and_isr = kv.api_key_of("LeaderAndIsr")
    migration = next(r for r in kv.RELEASES if kraft_version <= (kv.release_table(r).get(leader_and_isr) or (0, -1))[1])
    return tuple(i.name for i in zookeeper), with_zookeeper[-1], first_4x, migration


def path_to_4x(release: str | None, advertised: set[int]) -> str:
    """A broker's steps to Kafka 4.x: its release (inferred) and whether its ApiVersions table
    advertises ZooKeeper-only APIs (ZooKeeper mode) decide whether it goes through KRaft."""
    names, last_zookeeper, first_4x, migration = _zookeeper_facts()
    zookeeper_keys = {kv.api_key_of(name) for name in names}
    try:
        resolved = kv.resolve_release(release) if release else None
    except (KeyError, ValueError):
        resolved = None
    order = {r: i for i, r in enumerate(kv.RELEASES)}
    if resolved is not None and order[resolved] >= order[first_4x]:
        return "already on 4.x"
    no_zookeeper = (
        f"Kafka {first_4x} and later have no ZooKeeper mode (their brokers advertise none of {', '.join(names)})"
    )
    if not advertised & zookeeper_keys:
        return (
            f"runs KRaft (advertises none of the ZooKeeper-only APIs): no migration step; upgrade to 4.x "
            f"as Kafka's upgrade notes say. {no_zookeeper}."
        )
    steps = []
    if resolved is None or order[resolved] < order[migration]:
        steps.append(
            f"upgrade to a 3.x release from {migration} on (the first whose ZooKeeper brokers take "
            "LeaderAndIsr from a KRaft controller, isKRaftController)"
        )
    steps.append(
        f"migrate the cluster from ZooKeeper to KRaft, at the latest on {last_zookeeper} (the bridge: the "
        "last release with ZooKeeper mode)"
    )
    steps.append(f"then upgrade to 4.x. {no_zookeeper}")
    return (
        f"runs ZooKeeper mode (advertises {', '.join(n for n in names if kv.api_key_of(n) in advertised)}): "
        + "; ".join(steps)
        + "."
    )


def _clients_section(
    clients: list[dict[str, Any]], partly: list, window: str
) -> tuple[str, str, list[str], list[list[str]]]:
    """The "Next steps" table of the clients not ready for Kafka 4.x."""
    return (
        "Next steps: clients not ready for Kafka 4.x",
        (
            f"{len(clients)} client(s) send versions Kafka 4.x removed, most requests first: the likely "
            "library (KIP-511 name, or the fingerprint: a low-confidence one is a guess), the brokers it sent "
            "requests to, why, what real 4.x brokers did with such a client, and what to do. "
            if clients
            else "No client sends a version every Kafka 4.x release refuses"
            + (" (but see the versions some 4.x releases refuse, below). " if partly else ". ")
        )
        + f"Only clients that sent a request in the capture window ({window}) are listed: a client silent "
        "in that window is not, whatever versions it uses.",
        [
            "client",
            "client_id",
            "brokers",
            "requests",
            "removed in 4.x",
            "likely software",
            "versions",
            "confidence",
            "cause",
            "on a 4.x broker",
            "fix",
        ],
        [
            [
                _text(s["client_ip"]),
                _text(s["client_id"]),
                ", ".join(s.get("brokers") or ()) or "-",
                f"{s['requests']:,}",
                f"{s['removed_in_4x_requests']:,}",
                _text(s["software"]),
                _text(s["versions"]),
                _text(s["confidence"]),
                s["cause"],
                _text(s.get("symptom")),
                s["fix"],
            ]
            for s in clients
        ],
    )


def section_rows(facts: dict[str, Any]) -> list[tuple[str, str, list[str], list[list[str]]]]:
    """The two "Next steps" tables (clients, brokers), for the top of the report."""
    steps = facts.get("next_steps", {"clients": [], "brokers": []})
    clients = steps["clients"]
    partly = partly_served(facts.get("readiness", {}).get("deprecated_not_removed", []))
    window = capture_window(facts)
    out = [_clients_section(clients, partly, window)]
    if partly:
        out.append(
            (
                "Next steps: versions some Kafka 4.x releases refuse",
                "Deprecated versions that some 4.x releases refuse and later ones serve again (kproto's "
                "release tables): a client sending them breaks on those releases only.",
                ["client", "client_id", "version", "requests", "refused by", "fix"],
                [
                    [
                        _text(r["client_ip"]),
                        _text(r["client_id"]),
                        r["version"],
                        f"{r['requests']:,}",
                        r["refused_by"],
                        r["fix"],
                    ]
                    for r in partly
                ],
            )
        )
    brokers = steps["brokers"]
    out.append(
        (
            "Next steps: brokers",
            "The release each broker's ApiVersions table matches, whether Kafka 4.x clients can use it, and "
            "the broker's own path to 4.x. Only brokers that answered an ApiVersions request in the capture "
            f"window ({window}) are listed.",
            ["broker", "release", "talks to 4.x clients", "why", "path to 4.x"],
            [
                [
                    b["broker"],
                    b["release"],
                    "yes" if b["talks_to_4x_clients"] else "no",
                    b["why"],
                    b.get("path_to_4x", ""),
                ]
                for b in brokers
            ],
        )
    )
    mismatches = [c for c in facts["clients"] if c.get("fingerprint_mismatch")]
    if mismatches:
        out.append(
            (
                "Next steps: software names the traffic contradicts",
                "The KIP-511 name wins in the clients table; the wire's fingerprint says otherwise.",
                ["client", "client_id", "what each says"],
                [[_text(c["client_ip"]), _text(c["client_id"]), c["fingerprint_mismatch"]] for c in mismatches],
            )
        )
    return out


def capture_window(facts: dict[str, Any]) -> str:
    """The capture window: the first and the last packet's time over every input."""
    total: dict[str, Any] = next((r for r in facts.get("summary", []) if r.get("capture") == "*"), {})
    first, last = total.get("first_seen"), total.get("last_seen")
    if first is None or last is None:
        return "packet times unknown"
    return f"first packet {first}, last packet {last} UTC"


def _text(value: Any) -> str:
    return "" if value is None else str(value)
