"""Decode one Kafka frame given as hex, base64 or a file, and print it as JSON or a tree.

    kproto decode --hex '00 12 00 03 00 00 00 01 00 04 6d 65 00 ...'
    kproto decode --base64 ABIAAwAAAAE... --format tree
    kproto decode --file response.bin --api-key Metadata --api-version 12
    xxd -r -p frame.hex | kproto decode

A request says its API and version in its header; a response does not, so it
needs ``--api-key`` and ``--api-version`` (of the request it answers). The 4-byte
size prefix is detected (the frame starts with its own length), or forced with
``--size-prefixed`` / ``--no-size-prefix``. Needs no extra (no numpy): a plain
``pip install .`` runs it.

Exit status: 0 when the frame decoded; 1 when it does not (the decoder's error
names API, version, field path and byte offset counted from the start of the
frame without its size prefix); 2 for usage errors and bad hex or base64.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import re
import struct
import sys

HELP = "Decode one Kafka frame given as hex, base64 or a file, and print it as JSON or a tree"

EXIT_OK = 0
EXIT_BAD_FRAME = 1
EXIT_USAGE = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--hex", metavar="HEX", help="the frame as hex (spaces, colons and newlines ignored)")
    given.add_argument("--base64", metavar="TEXT", help="the frame as base64")
    given.add_argument("--file", metavar="PATH", help='a file holding the frame\'s bytes ("-": stdin, the default)')
    parser.add_argument(
        "--api-key", metavar="API", help="decode a response to this API (name or key); needs --api-version"
    )
    parser.add_argument("--api-version", type=int, metavar="N", help="the version of the request answered")
    prefix = parser.add_mutually_exclusive_group()
    prefix.add_argument(
        "--size-prefixed",
        action="store_true",
        default=None,
        dest="size_prefixed",
        help="the frame starts with its 4-byte size (default: detected)",
    )
    prefix.add_argument(
        "--no-size-prefix", action="store_false", dest="size_prefixed", help="the frame has no 4-byte size prefix"
    )
    parser.add_argument("--format", choices=("json", "tree"), default="json")


def frame_bytes(args: argparse.Namespace) -> bytes:
    """The bytes given; ValueError when the text is not valid hex or base64."""
    if args.hex is not None:
        text = re.sub(r"[\s:]", "", args.hex)
        if text[:2].lower() == "0x":
            text = text[2:]
        try:
            return bytes.fromhex(text)
        except ValueError:
            raise ValueError("--hex: not hex digits") from None
    if args.base64 is not None:
        try:
            return base64.b64decode("".join(args.base64.split()), validate=True)
        except binascii.Error as exc:
            raise ValueError(f"--base64: {exc}") from None
    if args.file in (None, "-"):
        return sys.stdin.buffer.read()
    with open(args.file, "rb") as handle:
        return handle.read()


def has_size_prefix(data: bytes) -> bool:
    """Whether ``data`` starts with a 4-byte size equal to the bytes that follow it."""
    return len(data) >= 4 and struct.unpack_from(">i", data)[0] == len(data) - 4


def run(args: argparse.Namespace) -> int:
    import kproto
    from kproto import versions
    from kproto._tree import tree_of

    api_key = None
    if args.api_key is not None:
        try:
            api_key = versions.api_key_of(args.api_key)
        except KeyError as exc:
            print(f"kproto decode: {exc.args[0]}", file=sys.stderr)
            return EXIT_USAGE
        if args.api_version is None:
            print("kproto decode: a response needs --api-version (of the request it answers)", file=sys.stderr)
            return EXIT_USAGE
    elif args.api_version is not None:
        print("kproto decode: --api-version goes with --api-key (a request's header says its version)", file=sys.stderr)
        return EXIT_USAGE
    try:
        data = frame_bytes(args)
    except (ValueError, OSError) as exc:
        print(f"kproto decode: {exc}", file=sys.stderr)
        return EXIT_USAGE
    size_prefixed = has_size_prefix(data) if args.size_prefixed is None else args.size_prefixed
    try:
        if api_key is None:
            request = kproto.decode_request(data, size_prefixed=size_prefixed)
            header = {
                "api_key": request.api_key,
                "api": versions.api_name(request.api_key),
                "api_version": request.api_version,
                "correlation_id": request.correlation_id,
                "client_id": request.client_id,
            }
            record = {
                "direction": "request",
                "size_prefixed": size_prefixed,
                "header": header,
                "body": request.body.to_dict(),
            }
        else:
            assert args.api_version is not None  # checked with the arguments above
            response = kproto.decode_response(data, api_key, args.api_version, size_prefixed=size_prefixed)
            header = {
                "api_key": api_key,
                "api": versions.api_name(api_key),
                "api_version": response.api_version,
                "correlation_id": response.correlation_id,
            }
            record = {
                "direction": "response",
                "size_prefixed": size_prefixed,
                "header": header,
                "body": response.body.to_dict(),
            }
    except kproto.DecodeError as exc:
        framing = "with" if size_prefixed else "without"
        print(
            f"kproto decode: cannot decode the {'request' if api_key is None else 'response'} "
            f"({len(data)} bytes, read {framing} a size prefix): {exc}",
            file=sys.stderr,
        )
        return EXIT_BAD_FRAME
    if args.format == "tree":
        sys.stdout.write("".join(tree_of(record, "")))
    else:
        sys.stdout.write(json.dumps(record, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK
