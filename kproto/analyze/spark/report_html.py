"""The report as HTML: the tables of kproto/analyze/spark/report_sections.py and inline SVG charts
(the file needs no network and no JavaScript)."""

from __future__ import annotations

import html
import re

from kproto.analyze.spark.report_sections import capture_names, sections, shown_capture, tls_lines, topic_label

_NUMBER = re.compile(r"-?[\d,]+(\.\d+)?")


#: A run of letters and digits up to this long is a word, never broken across lines; a longer
#: one (an id, a hash) may break, every LONG_RUN characters (tools/report_screenshot.py checks both).
LONG_RUN = 24
_SEPARATOR = re.compile(r"([/_.])(?=\w)")
_LONG_RUN = re.compile(rf"[A-Za-z0-9]{{{LONG_RUN + 1},}}")


def _breakable(text: str) -> str:
    """Escaped cell text that may wrap after a path's or name's separators and inside long
    ids, and nowhere else: CSS alone keeps words whole only if the table may overflow."""
    text = _LONG_RUN.sub(lambda m: "\0".join(m[0][i : i + LONG_RUN] for i in range(0, len(m[0]), LONG_RUN)), text)
    return html.escape(_SEPARATOR.sub("\\1\0", text)).replace("\0", "<wbr>")


def _cell(text: str) -> str:
    """A table cell: numbers right-aligned, short tokens (addresses, versions) kept whole."""
    if _NUMBER.fullmatch(text):
        return f"<td class='n'>{html.escape(text)}</td>"
    if len(text) <= 16 and " " not in text:
        return f"<td class='t'>{html.escape(text)}</td>"
    return f"<td>{_breakable(text)}</td>"


CHART_LABEL_CHARS = 34  # what fits left of the bars at 12 px


def short_label(label: str, limit: int = CHART_LABEL_CHARS) -> str:
    """``label``, or its start and an ellipsis when it is longer than ``limit`` characters."""
    return label if len(label) <= limit else label[: limit - 1] + "\u2026"


def bar_chart(title: str, labels: list[str], series: list[tuple[str, list[float]]], unit: str = "") -> str:
    """A horizontal bar chart as inline SVG (one bar per label and series)."""
    if not labels:
        return ""
    colors = ["#3b6ea5", "#e07b39", "#5aa469", "#b04a5a"]
    peak = max((v for _, values in series for v in values if v), default=1) or 1
    bar, gap, label_width, width = 14, 6, 260, 760
    group = bar * len(series) + gap
    height = 40 + group * len(labels) + 20 * len(series)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{html.escape(title)}">',
        f'<text x="0" y="16" font-weight="bold" font-size="14">{html.escape(title)}</text>',
    ]
    for i, label in enumerate(labels):
        y = 30 + i * group
        parts.append(
            f'<text x="{label_width - 6}" y="{y + bar * len(series) / 2 + 4}" text-anchor="end" '
            f'font-size="12"><title>{html.escape(label)}</title>{html.escape(short_label(label))}</text>'
        )
        for j, (_name, values) in enumerate(series):
            value = values[i] or 0
            length = (width - label_width - 110) * value / peak
            parts.append(
                f'<rect x="{label_width}" y="{y + j * bar}" width="{max(length, 0.5):.1f}" '
                f'height="{bar - 2}" fill="{colors[j % len(colors)]}"/>'
            )
            parts.append(
                f'<text x="{label_width + length + 4:.1f}" y="{y + j * bar + bar - 4}" font-size="11">'
                f"{value:,.3g}{html.escape(unit)}</text>"
            )
    y = 30 + group * len(labels) + 6
    for j, (name, _values) in enumerate(series):
        parts.append(
            f'<rect x="{label_width + j * 150}" y="{y}" width="10" height="10" '
            f'fill="{colors[j % len(colors)]}"/><text x="{label_width + j * 150 + 14}" y="{y + 9}" '
            f'font-size="11">{html.escape(name)}</text>'
        )
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
            "Requests per API version",
            [
                f"{r['api_name']} v{r['api_version']}" + (" (removed in 4.x)" if r["removed_in_4x"] else "")
                for r in versions
            ],
            [("requests", [r["requests"] for r in versions])],
        ),
        "Latency per API": bar_chart(
            "Latency per API (ms)",
            [r["api_name"] for r in latency],
            [("p50", [r["p50_ms"] for r in latency]), ("p99", [r["p99_ms"] for r in latency])],
            " ms",
        ),
        "Produce and fetch throughput by topic": bar_chart(
            "Bytes per topic-partition (MB)",
            [f"{topic_label(t)}-{t['partition']}" for t in topics],
            [
                ("produce", [t["produce_bytes"] / 1e6 for t in topics]),
                ("fetch", [t["fetch_bytes"] / 1e6 for t in topics]),
            ],
            " MB",
        ),
        "Clients and their software (KIP-511)": bar_chart(
            "Requests per client",
            [f"{c['client_id']} ({c['client_software_name'] or c.get('likely_software') or '?'})" for c in clients],
            [
                ("requests", [c["requests"] for c in clients]),
                ("removed in 4.x", [c["removed_in_4x_requests"] for c in clients]),
            ],
        ),
        "Captures and accounting": bar_chart(
            "Frames per capture",
            [shown_capture(names, r["capture"]) for r in summary],
            [
                ("decoded", [r.get("frames_ok") or 0 for r in summary]),
                ("undecodable", [r.get("frames_undecodable") or 0 for r in summary]),
            ],
        ),
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
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Kafka traffic report</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Kafka traffic report</h1>",
        f"<p class='note'>Generated {html.escape(facts['generated_at'])} by kproto "
        f"{html.escape(facts['kproto_version'])} (Spark {html.escape(facts['spark_version'])}).</p>",
    ]
    input_errors = facts.get("input_errors", [])
    if input_errors:
        unread = sum(e["unread_bytes"] for e in input_errors)
        parts.append(
            f"<p class='warn'><b>Not every input was read completely:</b> "
            f"{len({e['capture'] for e in input_errors})} input(s), {unread:,} bytes not read; "
            "see the first table.</p>"
        )
    for line in tls_lines(facts):
        parts.append(f"<p class='warn'><b>TLS:</b> {html.escape(line)}</p>")
    if readiness["removed_in_4x_requests"]:
        parts.append(
            f"<p class='warn'><b>Not ready for Kafka 4.x:</b> {readiness['removed_in_4x_requests']:,} "
            f"request(s) from {readiness['clients_sending_removed_versions']} client(s) use API versions "
            "Kafka 4.x removed (KIP-896).</p>"
        )
    for title, note, header, rows in sections(facts):
        parts.append(f"<h2>{html.escape(title)}</h2><p class='note'>{html.escape(note)}</p>")
        if title in figure and rows:
            parts.append(figure[title])
        if not rows:
            parts.append("<p>None.</p>")
            continue
        parts.append(
            "<div class='scroll'><table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"
        )
        for row in rows:
            cells = "".join(_cell(c) for c in row)
            parts.append(f"<tr>{cells}</tr>")
        parts.append("</table></div>")
    parts.append("</body></html>")
    return "\n".join(parts)
