"""Print the frames of captures as JSON Lines or a readable tree (no Spark needed).

    kproto dump broker.pcap | jq .
    kproto dump broker.pcapng --api Metadata --direction response --format tree
    tcpdump -U -w - 'tcp port 9092' | kproto dump - --client-id my-app
    kproto dump growing.pcap --follow       # like tail -f: frames as tcpdump writes them

Reads pcap, pcapng and size-prefixed frame dumps ("-" for stdin) a batch at a
time, so memory stays flat on any size; a pipe or a followed file is printed as
it arrives. Responses are decoded with the API and version of their request
(paired within the stream). See docs/dump.md.

Exit status: 0 when every input was read completely (an input without Kafka
frames says so on stderr); 3 when an input could not be read completely, or is
empty (the frames before the problem are printed, then the problem on stderr:
file, byte offset, reason); 4 when inputs were read completely but bytes of
their Kafka connections' TCP streams were lost or not framed (gaps, snap length,
a mid-connection start, an incomplete last frame: summed on stderr); 2 for usage
errors, missing inputs and a missing arrow extra. Ctrl-C ends --follow with the
status so far.
"""

from __future__ import annotations

import argparse
import os
import sys

HELP = "Print the frames of captures as JSON Lines or a readable tree (no Spark needed)"

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3  # some input could not be read completely
EXIT_LOST_BYTES = 4  # read completely, but its TCP streams lost bytes (gaps) or bytes were not framed
# How stderr names the connections that are not Kafka (the connections table's kind).
KIND_NAMES = {"tls": "TLS", "zookeeper": "ZooKeeper", "http": "HTTP", "other": "another protocol"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help='capture files (pcap, pcapng, size-prefixed frame dumps); "-" for stdin',
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "tree"),
        default=None,
        help="JSON Lines (the default when stdout is not a terminal) or an indented tree",
    )
    parser.add_argument(
        "--api",
        action="append",
        default=[],
        metavar="API",
        help="only this API, by name (Metadata, FetchRequest) or key (repeatable)",
    )
    parser.add_argument(
        "--api-version", type=int, action="append", default=[], metavar="N", help="only this API version (repeatable)"
    )
    parser.add_argument(
        "--client-id",
        action="append",
        default=[],
        metavar="ID",
        help="only frames of this client id; a response goes with its request (repeatable)",
    )
    parser.add_argument(
        "--connection",
        type=int,
        action="append",
        default=[],
        metavar="ID",
        help="only this connection id (numbered per capture from 0; repeatable)",
    )
    parser.add_argument("--direction", choices=("request", "response"), default=None)
    parser.add_argument(
        "--status",
        choices=("ok", "error"),
        default=None,
        help="decode status: only frames that decoded (ok) or did not (error: truncated, "
        "unknown API, no request seen...); for Kafka error codes see --error",
    )
    parser.add_argument(
        "--error",
        action="append",
        default=[],
        metavar="CODE",
        help="only frames whose body has an error_code (top level or nested) equal to this "
        "Kafka error, by name (UNKNOWN_TOPIC_OR_PARTITION) or number (3); repeatable",
    )
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="keep reading each file as it grows, like tail -f (until Ctrl-C); stdin is always read as it arrives",
    )
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="stop after N frames")
    add_connection_arguments(parser, "print them as they are")
    parser.add_argument(
        "--records-base64",
        action="store_true",
        help="record sets as base64 of their bytes (default: a summary: batches, records, bytes, compression)",
    )


def add_connection_arguments(parser: argparse.ArgumentParser, show: str) -> None:
    """--broker-port, --port and --show-credentials (kproto dump and kproto analyze); ``show``:
    what --show-credentials does with them."""
    parser.add_argument(
        "--broker-port",
        type=int,
        action="append",
        metavar="PORT",
        help="a broker port, to tell requests from responses (repeatable; default 9092). "
        "It does not filter: a connection is read as Kafka once its frames confirm it",
    )
    parser.add_argument(
        "--port",
        type=int,
        action="append",
        default=[],
        metavar="PORT",
        help="read every connection on this port as Kafka, whatever it carries (repeatable; "
        "for the rare case the frames cannot confirm it); also a broker port",
    )
    parser.add_argument(
        "--show-credentials",
        action="store_true",
        help=f"SASL tokens, delegation token HMACs and SCRAM salts are redacted by default: {show}",
    )


def run(args: argparse.Namespace) -> int:
    from kproto import versions
    from kproto.analyze.dump import Filters, Input, jsonl_lines, record_batches, tree_lines
    from kproto.arrow import frames as kb

    try:
        apis = {versions.api_key_of(api) for api in args.api}
    except KeyError as exc:
        print(f"kproto dump: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    try:
        error_codes = {error_code_of(text) for text in args.error}
    except KeyError as exc:
        print(f"kproto dump: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    if args.limit is not None and args.limit < 0:
        print("kproto dump: --limit must be 0 or more", file=sys.stderr)
        return EXIT_USAGE
    for path in args.paths:
        problem = input_problem(path)
        if problem:
            print(f"kproto dump: {path}: {problem}", file=sys.stderr)
            return EXIT_USAGE
    filters = Filters(
        apis=apis,
        api_versions=set(args.api_version),
        client_ids=set(args.client_id),
        connections=set(args.connection),
        direction=None if args.direction is None else (kb.RESPONSE if args.direction == "response" else kb.REQUEST),
        status=args.status,
        error_codes=error_codes,
    )
    output_format = args.format or ("tree" if sys.stdout.isatty() else "jsonl")
    lines_of = tree_lines if output_format == "tree" else jsonl_lines
    records = "base64" if args.records_base64 else "summary"
    left = args.limit
    status = EXIT_OK
    if args.follow or "-" in args.paths:
        from kproto.analyze.dump import warm_up

        warm_up()  # so that the first frame of a live input is not the one that waits for it
    try:
        for path in args.paths:
            if left == 0:
                break
            source = Input(
                path, broker_ports=tuple(args.broker_port or (9092,)), kafka_ports=tuple(args.port), follow=args.follow
            )
            batches = record_batches(source, filters, records=records, show_credentials=args.show_credentials)
            try:
                for frames, decoded, client_id in batches:
                    if left is not None and frames.num_rows > left:
                        frames, decoded, client_id = frames.slice(0, left), decoded.slice(0, left), client_id[:left]
                    sys.stdout.write("".join(lines_of(frames, decoded, client_id)))
                    sys.stdout.flush()  # a live input's frames are seen as they come
                    if left is not None:
                        left -= frames.num_rows
                        if left == 0:
                            break
            except OSError as exc:
                if isinstance(exc, BrokenPipeError):
                    raise  # the reader left: kproto.analyze.cli ends quietly
                sys.stdout.flush()
                print(f"kproto dump: {source.name}: {exc}", file=sys.stderr)
                status = EXIT_INCOMPLETE
                continue
            finally:
                batches.close()
            report_other_protocols(source)
            if source.error is not None and left != 0:
                sys.stdout.flush()
                print(f"kproto dump: {source.error}", file=sys.stderr)
                status = EXIT_INCOMPLETE
            elif source.frames_read == 0 and left != 0:
                print(
                    f"kproto dump: {source.name}: no Kafka frames ({source.format}, {source.bytes_read:,} bytes)",
                    file=sys.stderr,
                )
            if report_losses(source, left) and status == EXIT_OK:  # an input not read completely (3) says more
                status = EXIT_LOST_BYTES
    except KeyboardInterrupt:  # how --follow (or a live pipe) is ended
        sys.stdout.flush()
    return status


def report_other_protocols(source) -> None:
    """One stderr line per kind of connection that is not Kafka (TLS, ZooKeeper, HTTP, other)."""
    for kind, (count, size, ports) in sorted(source.other_protocols.items()):
        if kind == "empty":
            continue
        sys.stdout.flush()
        print(
            f"kproto dump: {source.name}: {count} connection{'s' if count > 1 else ''} on port"
            f"{'s' if len(ports) > 1 else ''} {', '.join(map(str, ports))} {'are' if count > 1 else 'is'} "
            f"{KIND_NAMES.get(kind, kind)}, not Kafka: {size:,} bytes counted, not decoded"
            + (" (Kafka inside TLS cannot be read without keys)" if kind == "tls" else "")
            + (
                " (its frames did not prove Kafka: a capture that starts late may hold no request with its "
                f"response; --port {ports[0]} reads it as Kafka)"
                if kind == "other"
                else ""
            ),
            file=sys.stderr,
        )


def error_code_of(text: str) -> int:
    """A Kafka error code given by number or name (any case); KeyError naming the text otherwise."""
    from kproto.errors import ErrorCode

    try:
        return int(text)
    except ValueError:
        pass
    try:
        return ErrorCode.by_name(text.strip().upper().replace("-", "_")).code
    except KeyError:
        raise KeyError(
            f"--error {text}: not a Kafka error code name or number (e.g. UNKNOWN_TOPIC_OR_PARTITION or 3)"
        ) from None


def input_problem(path: str) -> str:
    """Why ``path`` cannot be read as an input ("" when it can)."""
    if path == "-":
        return ""
    if os.path.isdir(path):
        return "is a directory (give the capture files in it, e.g. DIR/*.pcap)"
    if not os.path.exists(path):
        return "no such file"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied)"
    return ""


def report_losses(source, left) -> bool:
    """One stderr line summing the bytes the input's Kafka streams lost or did not frame;
    True when there were any."""
    lost = source.losses
    if left == 0 or not any(lost.get(name) for name in ("gap_bytes", "snapped_bytes", "skipped_bytes", "tail_bytes")):
        return False
    sys.stdout.flush()
    gaps = f"{lost['gaps']:,} gap" + ("" if lost["gaps"] == 1 else "s")
    snapped = (
        f"snaplen {' / '.join(map(str, source.snap_lengths))}: bodies not captured, "
        f"{lost['snapped_bytes']:,} bytes cut off"
        if lost["snapped_bytes"] and source.snap_lengths
        else f"{lost['snapped_bytes']:,} bytes cut off by the snap length"
    )
    print(
        f"kproto dump: {source.name}: {lost['gap_bytes']:,} bytes never captured in {gaps}; {snapped}; "
        f"{lost['skipped_bytes']:,} bytes skipped to find frame boundaries; "
        f"{lost['tail_bytes']:,} bytes of incomplete last frames",
        file=sys.stderr,
    )
    return True
