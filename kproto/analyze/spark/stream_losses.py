"""The ``errors`` table's ``stream_loss`` rows: what each connection's TCP streams lost.

Gaps (packets the capture dropped), the snap length, the bytes skipped to find a frame
boundary and incomplete last frames are in the accounting (``summary``, ``connections``);
these rows say, per connection and direction, which and why, next to the input errors.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

#: The stream losses of a connection direction, each a part of a ``stream_loss`` row's reason.
STREAM_LOSSES = (
    ("gap_bytes", "bytes never captured in {gaps:,} gap(s)"),
    ("snapped_bytes", "bytes of bodies not captured (cut off by the snap length)"),
    ("skipped_bytes", "bytes skipped to find a frame boundary (a mid-connection start, after a gap, an invalid size)"),
    ("tail_bytes", "bytes of an incomplete last frame"),
)


def stream_loss_rows(accounting: Iterable[Any]) -> list[dict]:
    """The ``errors`` table's ``stream_loss`` rows: one per connection and direction whose TCP
    stream lost bytes (gaps, the snap length) or did not frame them (skipped, an incomplete
    last frame), with its addresses, the bytes and why. They are no input-reading problem:
    they leave ``Result.errors`` (and the exit status) alone; the summary has their sums.

    ``accounting``: the compact rows, as for :func:`summary_rows`; a connection read by
    several ranges is one connection (its counters add up).
    """
    merged: dict[tuple, dict] = {}
    for r in accounting:
        if r["kind"] != "connection":
            continue
        info = json.loads(r["info"])
        for side in ("request", "response"):
            row = merged.setdefault(
                (r["capture"], r["connection_id"], side),
                {"info": info, "gaps": 0, **{name: 0 for name, _ in STREAM_LOSSES}},
            )
            row["gaps"] += info.get(f"{side}_gaps", 0)
            for name, _ in STREAM_LOSSES:
                row[name] += info.get(f"{side}_{name}", 0)
    rows = []
    for (capture, connection_id, side), lost in sorted(merged.items()):
        total = sum(lost[name] for name, _ in STREAM_LOSSES)
        if not total:
            continue
        info = lost["info"]
        parts = [f"{lost[name]:,} " + text.format(gaps=lost["gaps"]) for name, text in STREAM_LOSSES if lost[name]]
        rows.append(
            {
                "capture": capture,
                "category": "stream_loss",
                "offset": None,
                "reason": (
                    f"connection {connection_id} ({info['client_ip']}:{info['client_port']} -> "
                    f"{info['server_ip']}:{info['server_port']}), {side}s: " + "; ".join(parts)
                ),
                "unread_bytes": 0,
                "file": None,
                "connection_id": connection_id,
                "direction": side,
                "lost_bytes": total,
            }
        )
    return rows
