"""The report as a reader sees it: rendered by headless Chromium, it fits the page.

Long client ids, deep capture paths and wide tables must neither widen the page nor
run past its edge, at a desktop and at a narrow window; a screenshot is taken (and
kept in pytest's temporary folder for a person to look at). The browser comes from
scripts/install-browser.sh (Debian's chromium-headless-shell); without one these
tests skip and say so.
"""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path

import pytest

from kproto.analyze.spark import report, report_html, report_sections
from tests.analyze.test_report import facts as small_facts

ROOT = Path(__file__).resolve().parents[2]


def _load_tool():
    spec = importlib.util.spec_from_file_location("report_screenshot", ROOT / "tools" / "report_screenshot.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


screenshot_tool = _load_tool()
needs_browser = pytest.mark.skipif(
    screenshot_tool.browser() is None, reason="no headless Chromium (scripts/install-browser.sh installs one)"
)


def long_facts() -> dict:
    """A report whose every table has something long in it: what real clusters produce."""
    data = small_facts()
    parent = "/srv/captures/eu-west-1/cluster-production-7/2026-11-24"
    row = data["summary"][0]
    data["summary"] = [
        dict(row, capture=f"{parent}/broker-{b}/kafka-{b}.pcap_{i:05d}_20261124153000.pcapng")
        for b in range(3)
        for i in range(2)
    ] + [dict(row, capture="*", format=None)]
    client = data["clients"][0]
    data["clients"] = [
        dict(
            client,
            client_id=f"order-service-{'x' * 40}-consumer-{n}",
            client_software_name="confluent-kafka-python",
            client_software_version="2.16.1-rdkafka-2.16.0",
            apis=[
                f"{name} v{v}"
                for name in (
                    "Produce",
                    "Fetch",
                    "Metadata",
                    "OffsetCommit",
                    "FindCoordinator",
                    "JoinGroup",
                    "SyncGroup",
                )
                for v in (3, 9, 12)
            ],
            first_seen="2026-11-24T01:25:54.600+00:00",
            last_seen="2026-11-24T01:25:58.609+00:00",
        )
        for n in range(12)
    ]
    brokers = [f"10.20.{n}.{n + 100}:9092" for n in range(3)]
    data["next_steps"] = {
        "clients": [
            {
                "client_ip": c["client_ip"],
                "client_id": c["client_id"],
                "brokers": brokers,
                "requests": 1200,
                "removed_in_4x_requests": 300,
                "software": "confluent-kafka-python",
                "versions": "2.0-2.3",
                "confidence": "KIP-511",
                "cause": "removed versions (ApiVersions v0, Produce v2): confluent-kafka-python 2.0-2.3 sends them",
                "fix": "upgrade confluent-kafka-python to 2.4",
            }
            for c in data["clients"][:3]
        ],
        "brokers": [
            {
                "broker": brokers[0],
                "release": "2.3",
                "talks_to_4x_clients": True,
                "why": "every API a client needs has a version Kafka 4.x clients send",
                "path_to_4x": "runs ZooKeeper mode (advertises LeaderAndIsr, StopReplica, UpdateMetadata): "
                "upgrade to a 3.x release from 3.4 on; migrate the cluster from ZooKeeper to KRaft, at the "
                "latest on 3.9 (the bridge); then upgrade to 4.x.",
            }
        ],
    }
    topic = data["topics"][0]
    data["topics"] = [
        dict(topic, topic=f"payments.{'settlement-' * 6}events.v{n}", compression="gzip,lz4,mixed") for n in range(4)
    ]
    return data


def test_chart_labels_are_shortened_with_the_full_text_on_hover():
    label = "order-service-" + "x" * 60
    svg = report_html.bar_chart("t", [label, "short"], [("s", [1.0, 2.0])])
    shown = report_html.short_label(label)
    assert len(shown) == report_html.CHART_LABEL_CHARS and shown.endswith("\u2026")
    assert f"<title>{label}</title>{shown}</text>" in svg
    assert "<title>short</title>short</text>" in svg


def test_captures_are_named_relative_to_their_common_parent():
    data = long_facts()
    parent, names = report_sections.capture_names(data)
    assert parent == "/srv/captures/eu-west-1/cluster-production-7/2026-11-24"
    assert (
        names[f"{parent}/broker-0/kafka-0.pcap_00000_20261124153000.pcapng"]
        == "broker-0/kafka-0.pcap_00000_20261124153000.pcapng"
    )
    text = report_sections.markdown(data)
    assert f"Captures are named relative to {parent}/." in text
    assert "| broker-2/kafka-2.pcap_00001_20261124153000.pcapng | pcap |" in text
    # A name that is not a path (a Parquet table's capture name) leaves every name whole.
    data["summary"][0]["capture"] = "from-parquet"
    assert report_sections.capture_names(data)[0] is None and "named relative" not in report_sections.markdown(data)


def test_mixed_compression_is_explained_only_when_it_occurs():
    data = small_facts()
    assert '"mixed"' not in report_sections.markdown(data)
    data["topics"][0]["compression"] = "gzip,mixed"
    assert report_sections.MIXED_COMPRESSION in report_sections.markdown(data)


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", head[16:24])


@needs_browser
def test_a_report_of_long_names_fits_the_page(tmp_path):
    html = report.write_report(long_facts(), tmp_path)["html"]
    layout = screenshot_tool.measure(html, width=1280)
    assert layout["window_width"] == 1280 and len(layout["tables"]) >= 8 and len(layout["charts"]) == 5
    assert screenshot_tool.problems(layout) == []
    # In a narrow window a table of 13 columns may scroll in its own box, but the page never widens.
    narrow = screenshot_tool.measure(html, width=900)
    assert narrow["page_width"] == 900
    assert screenshot_tool.problems(narrow, tables_may_scroll=True) == []


@needs_browser
def test_the_check_sees_a_table_that_does_not_fit(tmp_path):
    html = report.write_report(long_facts(), tmp_path)["html"]
    # The same report without the rules that make it fit: the check must say so.
    text = html.read_text().replace("overflow-wrap: break-word;", "").replace("max-width: 100%;", "")
    text = text.replace("<div class='scroll'>", "<div>")
    html.write_text(
        text.replace("white-space: nowrap;", "white-space: nowrap;", 1)
        .replace("td.t {", "td {", 1)
        .replace("td {", "td { white-space: nowrap; ", 1)
    )
    found = screenshot_tool.problems(screenshot_tool.measure(html, width=900))
    assert any(p.startswith("the page is") for p in found) and any(p.startswith("table") for p in found)


@needs_browser
def test_the_check_sees_a_word_broken_mid_word(tmp_path):
    """Words may wrap only between them: cells that let the browser break anywhere split
    "ApiVersions" into "ApiVersio" / "ns" in a 900 px window, and the check says so."""
    html = report.write_report(long_facts(), tmp_path)["html"]
    html.write_text(html.read_text().replace("overflow-wrap: break-word;", "overflow-wrap: anywhere;"))
    found = screenshot_tool.problems(screenshot_tool.measure(html, width=900), tables_may_scroll=True)
    assert any(p.startswith("word ") and "broken across lines" in p for p in found), found


@needs_browser
def test_a_screenshot_of_the_report(tmp_path):
    html = report.write_report(long_facts(), tmp_path)["html"]
    png = screenshot_tool.screenshot(html, tmp_path / "report.png", width=1280, height=1600)
    assert _png_size(png) == (1280, 1600)
    assert png.stat().st_size > 50_000  # text, tables and charts, not a blank page
