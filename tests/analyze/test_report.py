"""The report writer (no Spark): sections, Markdown, HTML with inline SVG charts."""

from __future__ import annotations

import json

from kproto.analyze.spark import report, report_html, report_sections


def facts() -> dict:
    summary = [
        {
            "capture": "a.pcap",
            "format": "pcap",
            "packets": 10,
            "connections": 1,
            "frames": 4,
            "frames_ok": 3,
            "frames_undecodable": 1,
            "exchanges_paired": 1,
            "no_response_expected": 1,
            "unpaired_requests": 0,
            "unpaired_responses": 1,
            "skipped_bytes": 0,
            "accounted": True,
        }
    ]
    summary.append(dict(summary[0], capture="*", format=None))
    return {
        "generated_at": "2025-01-01T00:00:00+00:00",
        "kproto_version": "0.1",
        "spark_version": "4.0.0",
        "summary": summary,
        "clients": [
            {
                "client_ip": "10.0.0.1",
                "client_id": "app",
                "client_software_name": "librdkafka",
                "client_software_version": "2.3.0",
                "connections": 1,
                "requests": 2,
                "apis": ["Produce v2"],
                "removed_in_4x_requests": 1,
                "first_seen": "t0",
                "last_seen": "t1",
            }
        ],
        "api_versions": [
            {
                "api_key": 0,
                "api_name": "Produce",
                "api_version": 2,
                "requests": 2,
                "clients": 1,
                "deprecated": True,
                "removed_in_4x": True,
            }
        ],
        "readiness": {
            "removed_in_4x_requests": 1,
            "deprecated_requests": 1,
            "clients_sending_removed_versions": 1,
            "removed": [
                {
                    "client_ip": "10.0.0.1",
                    "client_id": "app",
                    "software_name": "librdkafka",
                    "api_name": "Produce",
                    "api_version": 2,
                    "requests": 1,
                    "first_seen": "t0",
                    "last_seen": "t1",
                }
            ],
            "deprecated_not_removed": [],
        },
        "brokers": [],
        "kip511_fallbacks": [],
        "invalid_software_names": [],
        "errors": [],
        "latency": [{"api_key": 0, "api_name": "Produce", "exchanges": 1, "p50_ms": 1.5, "p99_ms": 2.0, "max_ms": 2.0}],
        "topics": [
            {
                "topic": "t|x",
                "partition": 0,
                "produce_bytes": 2_000_000,
                "produce_records": 5,
                "produce_bytes_per_s": 1_000_000.0,
                "fetch_bytes": 0,
                "fetch_records": 0,
                "fetch_bytes_per_s": None,
                "compression": "lz4",
            }
        ],
        "undecodable_frames": [
            {
                "direction": 1,
                "api_name": "?",
                "api_version": None,
                "status_name": "NO_REQUEST_INFO",
                "frames": 1,
                "first_error_offset": 0,
            }
        ],
        "unpaired": [{"pair_status_name": "UNPAIRED_RESPONSE", "api_name": "?", "exchanges": 1}],
    }


def test_markdown_tables_and_empty_sections():
    text = report_sections.markdown(facts())
    assert "| 10.0.0.1 | app | librdkafka | Produce | 2 | 1 | t0 | t1 |" in text
    assert "## Brokers\n\nFrom captured ApiVersions responses" in text and "None." in text
    assert "| t\\|x | 0 | 2.000 | 5 | 1.000 | 0.000 | 0 | - | lz4 |" in text  # pipes escaped
    assert "1 request(s) from 1 client(s) use versions Kafka 4.x removed" in text


def test_html_has_charts_and_escapes(tmp_path):
    paths = report.write_report(facts(), tmp_path)
    html = paths["html"].read_text()
    assert html.count("<svg") == 5
    assert "Not ready for Kafka 4.x" in html and "t|x-0" in html
    assert json.loads(paths["json"].read_text())["readiness"]["removed_in_4x_requests"] == 1


def test_inputs_not_read_completely_come_first(tmp_path):
    data = facts()
    assert "## Inputs not read completely\n\nEvery input was read completely." in report_sections.markdown(data)
    assert "## What is not in frames\n\nEvery byte and packet read is in a frame" in report_sections.markdown(data)
    data["input_errors"] = [
        {
            "capture": "bad.pcap",
            "category": "oversized_record",
            "offset": 4096,
            "reason": "pcap record with captured length 4294967295",
            "unread_bytes": 116,
        }
    ]
    data["summary"][0].update(file_bytes=5000, unread_bytes=116)
    data["summary"][1].update(file_bytes=5000, unread_bytes=116)
    text = report_sections.markdown(data)
    assert text.index("Not every input was read completely") < text.index("## Captures and accounting")
    assert "| bad.pcap | oversized_record | 4,096 | pcap record with captured length 4294967295 | 116 |" in text
    # Only the kinds of loss that occurred get a column.
    assert "| capture | file bytes | bytes not read (after an error) | accounted |" in text
    html = report.write_report(data, tmp_path)["html"].read_text()
    assert html.index("Not every input was read completely") < html.index("<h2>")


def test_bar_chart_scales_to_the_largest_value():
    svg = report_html.bar_chart("t", ["a", "b"], [("s", [1.0, 4.0])])
    widths = [float(part.split('"')[0]) for part in svg.split('width="')[2:]]
    assert widths[1] == 4 * widths[0]
    assert report_html.bar_chart("t", [], []) == ""


def test_next_steps_come_first_ranked_by_requests():
    """Clients not ready for 4.x, most requests first, with cause and fix; brokers and 4.x clients."""
    from kproto.analyze.spark import next_steps

    data = facts()
    quiet = dict(
        data["clients"][0],
        client_id="quiet",
        requests=1,
        client_software_name=None,
        client_software_version=None,
        api_order=["Metadata v1", "Produce v2"],
    )
    data["clients"].append(quiet)
    removed = data["readiness"]["removed"] + [dict(data["readiness"]["removed"][0], client_id="quiet")]
    brokers = [
        {
            "broker": "b:9092",
            "release": None,
            "exact": [],
            "closest": ["0.10.2"],
            "ranges": {"Produce": "0-2", "Fetch": "0-5", "Metadata": "0-2", "ApiVersions": "0-1"},
        },
        {
            "broker": "c:9092",
            "release": "3.9",
            "exact": ["3.9"],
            "closest": [],
            "ranges": {name: f"{lo}-{hi}" for name, (lo, hi) in _release_ranges("3.9").items()},
        },
    ]
    data["next_steps"] = {
        "clients": next_steps.client_steps(data["clients"], removed),
        "brokers": next_steps.broker_steps(brokers),
    }
    assert [s["client_id"] for s in data["next_steps"]["clients"]] == ["app", "quiet"]
    app, quiet_step = data["next_steps"]["clients"]
    assert app["confidence"] == "KIP-511" and "Produce v2" in app["cause"] and app["fix"]
    # Two requests kafka-python and sarama both send pinned: a guess, worded as one, with the library's own setting.
    assert quiet_step["confidence"] == "low" and quiet_step["cause"].startswith("a guess")
    assert quiet_step["software"].split(" or ") == ["kafka-python", "sarama"]
    assert "version setting (api_version)" in quiet_step["cause"] and "(Config.Version)" in quiet_step["cause"]
    assert "api_version" in quiet_step["fix"] and "closes the connection" in quiet_step["symptom"]
    old, new = data["next_steps"]["brokers"]
    assert (old["talks_to_4x_clients"], new["talks_to_4x_clients"]) == (False, True)
    assert "2.1 or later" in old["why"] and old["release"] == "0.10.2"
    text = report_sections.markdown(data)
    assert text.index("## Next steps: clients not ready for Kafka 4.x") < text.index("## Inputs not read completely")
    assert "| b:9092 | 0.10.2 | no |" in text and "| c:9092 | 3.9 | yes |" in text


def test_versions_some_4x_releases_refuse_are_not_called_ready():
    """JoinGroup v1 (deprecated, refused by 4.0.0 only, kproto's release tables): no "no client sends a
    removed version" line for it; its own table names the refusing release and the first that serves it."""
    from kproto import versions as kv
    from kproto.analyze.spark import next_steps

    data = facts()
    data["clients"][0].update(removed_in_4x_requests=0, apis=["JoinGroup v1"])
    joins = {
        "client_ip": "10.0.0.1",
        "client_id": "app",
        "api_key": 11,
        "api_version": 1,
        "api_name": "JoinGroup",
        "requests": 3,
        "not_served_by_4x": list(kv.version_info(11, 1).not_served_by_4x),
    }
    data["readiness"].update(removed=[], removed_in_4x_requests=0, deprecated_not_removed=[joins])
    data["next_steps"] = {"clients": next_steps.client_steps(data["clients"], []), "brokers": []}
    text = report_sections.markdown(data)
    assert "No client sends a version Kafka 4.x removed" not in text
    assert "No client sends a version every Kafka 4.x release refuses (but see" in text
    assert "## Next steps: versions some Kafka 4.x releases refuse" in text
    assert "| 10.0.0.1 | app | JoinGroup v1 | 3 | 4.0.0 | on 4.x, run 4.0.2 or later" in text


def test_next_steps_name_each_clients_brokers_and_the_capture_window():
    from kproto.analyze.spark import next_steps

    data = facts()
    data["clients"][0]["brokers"] = ["10.0.0.9:9092", "10.0.0.10:9092"]
    data["summary"][-1].update(first_seen="2025-01-01T00:00:00.000+00:00", last_seen="2025-01-01T00:05:00.000+00:00")
    data["next_steps"] = {
        "clients": next_steps.client_steps(data["clients"], data["readiness"]["removed"]),
        "brokers": [],
    }
    text = report_sections.markdown(data)
    assert "| 10.0.0.1 | app | 10.0.0.9:9092, 10.0.0.10:9092 | 2 | 1 |" in text
    window = "first packet 2025-01-01T00:00:00.000+00:00, last packet 2025-01-01T00:05:00.000+00:00 UTC"
    assert (
        f"Only clients that sent a request in the capture window ({window}) are listed: a client silent "
        "in that window is not" in text
    )
    data["summary"][-1].pop("first_seen")
    assert "capture window (packet times unknown)" in report_sections.markdown(data)


def test_a_brokers_own_path_to_4x_comes_from_the_tables():
    """A 2.3 broker in ZooKeeper mode: 3.x from the first release a KRaft controller can drive
    (3.4), KRaft by the last ZooKeeper release (3.9, the bridge), then 4.x; a KRaft broker
    has no migration step; a 4.x broker none at all."""
    from kproto import versions as kv
    from kproto.analyze.spark import next_steps

    assert next_steps._zookeeper_facts() == (("LeaderAndIsr", "StopReplica", "UpdateMetadata"), "3.9", "4.0.0", "3.4")
    old = next_steps.path_to_4x("2.3", set(kv.release_table("2.3")))
    assert old.startswith("runs ZooKeeper mode (advertises LeaderAndIsr, StopReplica, UpdateMetadata)")
    assert "upgrade to a 3.x release from 3.4 on" in old and "at the latest on 3.9 (the bridge" in old
    assert old.index("3.4") < old.index("3.9") < old.index("then upgrade to 4.x")
    recent = next_steps.path_to_4x("3.7", set(kv.release_table("3.7")))
    assert "from 3.4 on" not in recent and "at the latest on 3.9" in recent
    kraft = next_steps.path_to_4x("3.7", {kv.api_key_of(n) for n in ("Produce", "Fetch", "Metadata")})
    assert kraft.startswith("runs KRaft") and "migrate" not in kraft
    assert next_steps.path_to_4x("4.1", set(kv.release_table("4.1"))) == "already on 4.x"
    unknown = next_steps.path_to_4x(None, set(kv.release_table("2.3")))
    assert "from 3.4 on" in unknown
    broker = {
        "broker": "b:9092",
        "release": "2.3",
        "exact": ["2.3"],
        "closest": [],
        "ranges": {name: f"{lo}-{hi}" for name, (lo, hi) in _release_ranges("2.3").items()},
    }
    (step,) = next_steps.broker_steps([broker])
    assert step["talks_to_4x_clients"] and step["path_to_4x"] == old
    data = facts()
    data["next_steps"] = {"clients": [], "brokers": [step]}
    assert f"| b:9092 | 2.3 | yes | {step['why']} | {old} |" in report_sections.markdown(data)


def _release_ranges(release: str) -> dict:
    from kproto import versions as kv

    return {kv.api_name(key): span for key, span in kv.release_table(release).items()}
