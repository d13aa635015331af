"""Fuzz targets: one function per decoder family, each taking arbitrary bytes.

A target feeds its input to every available implementation (the Cython
extension and the pure-Python twin) and checks three things:

* nothing but a :class:`~kproto.errors.DecodeError` escapes (an IndexError,
  struct.error, SystemError, MemoryError, RecursionError ... is a bug, and a
  crash or sanitizer report is a bug of the C code);
* both implementations give the same result: equal values, or the same error:
  class, reason, byte offset, field path and API (the *differential* check; a user
  must get the same message whichever implementation is loaded);
* the result is deterministic (the same implementation twice gives the same answer
  where that is cheap to check).

A violation raises :class:`FuzzFailure`; a DecodeError is the normal answer to
bad bytes and is returned as part of the outcome. Targets never look at the
wall clock: the runner (tests/fuzz/run.py) times inputs and flags slow ones.

Where a decoder takes parameters besides the bytes (the API key and version of a
response, the size caps of a capture), the first input bytes choose them, so the
fuzzer explores those too; ``corpus.py`` writes its seeds in the same layout.
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from collections.abc import Callable

from kproto import _impl, limits, schema
from kproto.errors import DecodeError

IMPLEMENTATIONS = _impl.available()


class FuzzFailure(AssertionError):
    """An input that made a decoder misbehave (wrong exception, disagreement, ...)."""


# ---------------------------------------------------------------- outcomes
def plain(value):
    """A comparable form of a decoded value: messages as tuples, buffers as bytes, floats by bits.

    Messages of the two implementations are the same classes, but ``records``
    fields are each implementation's own Records view, and NaN != NaN, so values
    are reduced to plain data before comparing.
    """
    if isinstance(value, schema.Message):
        fields = tuple(plain(getattr(value, name)) for name in value._field_names)
        tags = value._unknown_tags or None
        tags = None if tags is None else tuple(sorted((t, bytes(v)) for t, v in tags.items()))
        return (type(value).__name__, fields, tags)
    if isinstance(value, (list, tuple)):
        return tuple(plain(v) for v in value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, float):
        return ("float", struct.pack(">d", value)) if math.isnan(value) else value
    if isinstance(value, (int, str, bool, uuid.UUID)) or value is None:
        return value
    if hasattr(value, "raw"):  # a Records view of either implementation
        return ("records", bytes(value.raw))
    return value


#: Reasons of the DecodeErrors raised since the runner last cleared it. The built-in
#: engine keeps inputs that produce a reason it has not seen: a cheap stand-in for
#: coverage feedback (atheris has the real thing).
reasons: list[str] = []


def error_outcome(exc: DecodeError):
    """The comparable form of a DecodeError: everything a user reads in its message."""
    reasons.append(f"{type(exc).__name__}:{exc.reason}")
    return ("error", (type(exc).__name__, exc.reason, exc.offset, exc.path, exc.api_key, exc.api_version))


def error_class(outcome) -> str:
    """The error class name of an outcome error_outcome() made (the runner counts outcomes by it)."""
    return outcome[1][0]


def call(name: str, impl: str, function: Callable, *args):
    """Run one decoder call; a DecodeError is an outcome, anything else a FuzzFailure."""
    try:
        return ("ok", function(*args))
    except DecodeError as exc:
        return error_outcome(exc)
    except RecursionError as exc:  # before Exception: it would be caught there anyway
        raise FuzzFailure(f"{name}[{impl}]: RecursionError: {exc}") from exc
    except Exception as exc:
        raise FuzzFailure(f"{name}[{impl}]: {type(exc).__name__} escaped: {exc}") from exc


def agree(name: str, outcomes: dict) -> None:
    """All implementations gave the same outcome (values already reduced with plain())."""
    items = list(outcomes.items())
    first_impl, first = items[0]
    for impl, other in items[1:]:
        if other != first:
            raise FuzzFailure(
                f"{name}: implementations disagree\n  {first_impl}: {_short(first)}\n  {impl}: {_short(other)}"
            )


def _short(outcome, limit: int = 600) -> str:
    text = repr(outcome)
    return text if len(text) <= limit else text[:limit] + "..."


def _codecs() -> dict:
    return {impl: _impl.load("codec", impl) for impl in IMPLEMENTATIONS}


# ---------------------------------------------------------------- message codec
_CODECS = _codecs()


def fuzz_request_header(data: bytes):
    """RequestHeader v0/v1/v2, its version chosen from the API key and version in the bytes."""
    outcomes = {}
    for impl, codec in _CODECS.items():
        # (header, header version, body offset); older codecs named it decode_request_header
        decode = getattr(codec, "decode_request_header_info", codec.decode_request_header)
        kind, value = call("request_header", impl, decode, data)
        if kind == "ok":
            header, version, offset = value
            value = (plain(header), version, offset)
        outcomes[impl] = (kind, value)
    agree("request_header", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


def fuzz_request(data: bytes):
    """A whole request payload: the header names the API and version of the body."""
    outcomes = {}
    for impl, codec in _CODECS.items():
        kind, value = call("request", impl, codec.decode_request, data)
        if kind == "ok":
            header, version, body = value
            value = (plain(header), version, plain(body))
        outcomes[impl] = (kind, value)
    agree("request", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


def _response_versions() -> list[tuple[int, int, int]]:
    """(api_key, lowest, highest version) of every response kproto has a schema for."""
    found = []
    for api_key in schema.api_keys():
        name = schema.response_name(api_key)
        if name is not None:
            lo, hi = schema.spec(name)["valid_versions"]
            found.append((api_key, lo, hi))
    return found


RESPONSE_APIS = _response_versions()


def response_selector(api_key: int, version: int) -> bytes:
    """The two leading bytes that make fuzz_response read a payload as this API and version."""
    for index, (key, lo, _hi) in enumerate(RESPONSE_APIS):
        if key == api_key:
            return bytes([index, version - lo])
    raise KeyError(api_key)


def fuzz_response(data: bytes):
    """A response payload; byte 0 picks the API, byte 1 the version (modulo what exists)."""
    if len(data) < 2:
        return ("skip", None)
    api_key, lo, hi = RESPONSE_APIS[data[0] % len(RESPONSE_APIS)]
    version = lo + data[1] % (hi - lo + 1)
    plan = schema.plan(schema.response_name(api_key), version)
    payload = data[2:]
    outcomes = {}
    for impl, codec in _CODECS.items():
        kind, value = call("response", impl, codec.decode_response, payload, api_key, version, plan)
        if kind == "ok":
            header, header_version, body = value
            value = (plain(header), header_version, plain(body))
        outcomes[impl] = (kind, value)
    agree(f"response api_key={api_key} v{version}", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


# ---------------------------------------------------------------- records
_RECORDS = {impl: _impl.load("records", impl) for impl in IMPLEMENTATIONS}
#: Decompressed-size caps the first input byte chooses from: a small one reaches the cap
#: code with small inputs, the default one the normal path.
RECORDS_CAPS = (1 << 12, 1 << 20)
#: Record-count limits (max_records_per_batch) byte 0 chooses from: a small one reaches the limit.
RECORDS_LIMITS = (3, 1 << 20)
#: Per-set limits (max_records_per_set, max_decompressed_size_per_set) byte 0 chooses from:
#: small ones reach them within a few batches.
RECORDS_SET_LIMITS = ((5, 1 << 7), (limits.DEFAULT_MAX_RECORDS_PER_SET, limits.DEFAULT_MAX_DECOMPRESSED_SIZE_PER_SET))


def records_options(
    verify_crc: bool,
    small_cap: bool,
    zero_copy: bool = False,
    small_limit: bool = False,
    small_set_limits: bool = False,
) -> bytes:
    """The leading byte that makes fuzz_records read with these options."""
    return bytes(
        [
            (1 if verify_crc else 0)
            | (2 if small_cap else 0)
            | (4 if zero_copy else 0)
            | (8 if small_limit else 0)
            | (16 if small_set_limits else 0)
        ]
    )


def _plain_record(record) -> tuple:
    return (
        record.offset,
        record.timestamp,
        plain(record.key),
        plain(record.value),
        tuple((k, plain(v)) for k, v in record.headers),
    )


def _read_records(
    module,
    data: bytes,
    verify_crc: bool,
    cap: int,
    zero_copy: bool = False,
    max_records: int = RECORDS_LIMITS[1],
    set_limits: tuple[int, int] = RECORDS_SET_LIMITS[1],
):
    """Everything a reader can ask of a Records buffer, as plain data (errors in line)."""
    records = module.Records(
        data,
        verify_crc=verify_crc,
        max_decompressed_size=cap,
        max_records_per_batch=max_records,
        max_records_per_set=set_limits[0],
        max_decompressed_size_per_set=set_limits[1],
    )
    out = []
    try:
        for batch in records:
            fields = sorted(batch.header_fields().items())
            try:
                out.append((fields, [_plain_record(r) for r in batch.records()], batch.crc_valid))
            except DecodeError as exc:
                out.append((fields, error_outcome(exc)))
    except DecodeError as exc:
        out.append(error_outcome(exc))
    try:
        tail = (records.truncated_tail, records.complete_size)
    except DecodeError as exc:
        tail = error_outcome(exc)
    try:
        table = records.to_arrow(zero_copy=zero_copy)  # zero_copy: binary_view key / value columns
        columns = table.to_pydict()
    except DecodeError as exc:
        columns = error_outcome(exc)
    singles = []  # the first batch read on its own, as each class (one of them refuses it)
    for cls in (module.RecordBatch, module.LegacyBatch):
        try:
            single = cls(data, verify_crc=verify_crc, max_decompressed_size=cap, max_records_per_batch=max_records)
            singles.append(sorted(single.header_fields().items()))
        except DecodeError as exc:
            singles.append(error_outcome(exc))
    return (tuple(out), tail, columns, tuple(singles))


def fuzz_records(data: bytes):
    """Record batches (magic 0, 1, 2, every codec): byte 0 picks CRC checking, the size cap,
    zero-copy Arrow columns, the record-count limit and the per-set limits."""
    if not data:
        return ("skip", None)
    verify_crc = bool(data[0] & 1)
    cap = RECORDS_CAPS[0] if data[0] & 2 else RECORDS_CAPS[1]
    zero_copy = bool(data[0] & 4)
    max_records = RECORDS_LIMITS[0] if data[0] & 8 else RECORDS_LIMITS[1]
    set_limits = RECORDS_SET_LIMITS[0] if data[0] & 16 else RECORDS_SET_LIMITS[1]
    body = data[1:]
    outcomes = {}
    for impl, module in _RECORDS.items():
        outcomes[impl] = call(
            "records", impl, _read_records, module, body, verify_crc, cap, zero_copy, max_records, set_limits
        )
    agree("records", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


# ---------------------------------------------------------------- captures
#: (max_pending_bytes, max_connections, max_frame_size) the first input byte chooses from:
#: small values drive reassembly into its gap, eviction and resync paths.
CAPTURE_OPTIONS = (
    (8 * 1024 * 1024, 65536, 100 * 1024 * 1024),
    (256, 2, 512),
)


def capture_options(small: bool) -> bytes:
    return bytes([1 if small else 0])


_COUNTED_CONNECTION_COLUMNS = (
    "_gaps",
    "_resyncs",
    "_skipped_bytes",
    "_tail_bytes",
    "_conflicting_segments",
    "_retransmitted_segments",
    "_truncated_packets",
)


def _read_capture(impl: str, body: bytes, options: tuple):
    from kproto.arrow.capture import CaptureReader

    pending, connections, frame_size = options
    reader = CaptureReader(
        body,
        implementation=impl,
        max_pending_bytes=pending,
        max_connections=connections,
        max_frame_size=frame_size,
        batch_frames=16,
        on_error="keep",
    )
    frames = [batch.to_pydict() for batch in reader]
    # the engine's connection rows as they are (the Arrow table of them adds nothing to check,
    # and building it cost more than reading the capture)
    rows = reader._connections
    counters = reader.counters
    if counters["input_bytes"] != counters["file_bytes"] + counters["trailing_bytes"] + counters["unread_bytes"]:
        raise FuzzFailure(f"capture[{impl}]: input bytes not accounted for: {counters}")
    stopped = reader.error
    if stopped is not None:
        reasons.append(f"stopped:{stopped.category}")
        counters["error"] = (stopped.category, stopped.reason, stopped.offset)
    # which counters moved, and how connections ended: feedback for the built-in engine
    reasons.extend(f"counter:{name}" for name, value in counters.items() if value)
    for row in rows:
        reasons.append(f"connection:{row['closed_by']}:{row['direction_source']}")
        reasons.extend(
            f"nonzero:{column}"
            for column, value in row.items()
            if value and column.endswith(_COUNTED_CONNECTION_COLUMNS)
        )
    return (frames, rows, counters)


def _stopped(outcome):
    """A capture whose reading stopped at a broken record is its own kind of outcome."""
    kind, value = outcome
    if kind == "ok" and "error" in value[2]:
        return ("stopped", value)
    return outcome


def fuzz_capture(data: bytes):
    """pcap / pcapng files through link, IP and TCP parsing, reassembly and frame cutting."""
    if not data:
        return ("skip", None)
    options = CAPTURE_OPTIONS[data[0] % len(CAPTURE_OPTIONS)]
    body = data[1:]
    outcomes = {impl: _stopped(call("capture", impl, _read_capture, impl, body, options)) for impl in IMPLEMENTATIONS}
    agree("capture", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


#: Link types fuzz_tcp wraps its packets in (byte 0 picks one): Ethernet, BSD NULL, raw IP, SLL, SLL2.
TCP_LINKTYPES = (1, 0, 101, 113, 276)


def tcp_packets(linktype: int, packets, small: bool = False) -> bytes:
    """The input that makes fuzz_tcp read these link-layer packets (a list of bytes)."""
    return bytes([TCP_LINKTYPES.index(linktype) | (8 if small else 0)]) + b"".join(
        struct.pack(">H", len(p)) + p for p in packets
    )


def _pcap(linktype: int, packets) -> bytes:
    out = [struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype)]
    for index, packet in enumerate(packets):
        out.append(struct.pack("<IIII", 1_700_000_000 + index, index, len(packet), len(packet)))
        out.append(packet)
    return b"".join(out)


def fuzz_tcp(data: bytes):
    """TCP reassembly and frame cutting behind an intact pcap: mutations land in packets, not the file.

    Byte 0 picks the link type (low bits) and small limits (bit 3); then each
    packet is a 2-byte big-endian length and the link-layer bytes.
    """
    if not data:
        return ("skip", None)
    linktype = TCP_LINKTYPES[(data[0] & 7) % len(TCP_LINKTYPES)]
    options = CAPTURE_OPTIONS[1 if data[0] & 8 else 0]
    packets, pos = [], 1
    while pos + 2 <= len(data):
        (size,) = struct.unpack_from(">H", data, pos)
        packets.append(data[pos + 2 : pos + 2 + size])
        pos += 2 + size
    body = _pcap(linktype, packets)
    outcomes = {impl: _stopped(call("tcp", impl, _read_capture, impl, body, options)) for impl in IMPLEMENTATIONS}
    agree("tcp", outcomes)
    kind, value = outcomes[IMPLEMENTATIONS[0]]
    # The pcap is intact, so reading never stops: what tells the outcomes apart is whether
    # the mutated streams still gave frames (their kinds are what the short fuzz counts).
    if kind == "ok" and not any(batch["size"] for batch in value[0]):
        kind = "no_frames"
    return (kind, value)


# ---------------------------------------------------------------- framing
def fuzz_framing(data: bytes):
    """Size-prefixed frames: iter_frames over the buffer and FrameReader fed in chunks agree.

    framing.py has no compiled twin, so its two readers are checked against each
    other instead. Byte 0 picks the chunk size, byte 1 the frame size cap.
    """
    from kproto.framing import FrameReader, iter_frames

    if len(data) < 2:
        return ("skip", None)
    chunk = 1 + data[0] % 16
    max_frame_size = (16, 256, 1 << 20)[data[1] % 3]
    body = data[2:]

    def whole():
        return [bytes(f) for f in iter_frames(body, max_frame_size)]

    def chunked():
        reader = FrameReader(max_frame_size)
        frames = []
        for start in range(0, len(body), chunk):
            frames.extend(reader.feed(body[start : start + chunk]))
        reader.close()
        return frames

    outcomes = {
        "iter_frames": call("framing", "iter_frames", whole),
        "FrameReader": call("framing", "FrameReader", chunked),
    }
    agree("framing", outcomes)
    return outcomes["iter_frames"]


# ---------------------------------------------------------------- batch decoder
def _batch_modules() -> dict:
    try:
        import kproto.arrow.frames  # noqa: F401  (needs pyarrow and numpy)
    except ImportError:
        return {}
    return {impl: _impl.load("batch", impl) for impl in IMPLEMENTATIONS}


_BATCHES = _batch_modules()
if _BATCHES:
    import inspect

    import kproto.arrow.frames

    _DECODE_FRAMES_OPTIONS = set(inspect.signature(kproto.arrow.frames.decode_frames).parameters)
else:
    _DECODE_FRAMES_OPTIONS = set()


def batch_options(
    responses: bool = False,
    arrow_input: bool = False,
    json_body: bool = True,
    api_key: int = 0,
    api_version: int = 0,
    records_summary: bool = False,
    partitions: bool = False,
    ids_as_dictionary: bool = False,
) -> bytes:
    """The three leading bytes that make fuzz_batch decode with these options."""
    return bytes(
        [
            (1 if responses else 0)
            | (2 if arrow_input else 0)
            | (4 if json_body else 0)
            | (8 if records_summary else 0)
            | (16 if partitions else 0)
            | (32 if ids_as_dictionary else 0),
            api_key & 0xFF,
            api_version & 0xFF,
        ]
    )


def _decode_batch(impl: str, body: bytes, flags: int, api_key: int, api_version: int):
    import numpy as np
    import pyarrow as pa

    import kproto.arrow.frames as kb

    direction = flags & 1
    json_body = "json" if flags & 4 else None
    # record sets in JSON bodies: base64 of the bytes, or a summary read from the batch headers
    options = {"records": "summary"} if flags & 8 and "records" in _DECODE_FRAMES_OPTIONS else {}
    if flags & 32 and "client_ids" in _DECODE_FRAMES_OPTIONS:
        options["client_ids"] = "dictionary"  # ids dictionary-encoded (text by default)
    saved = kb._batch
    kb._batch = _BATCHES[impl]  # decode_frames calls the module it loaded; point it at each twin
    try:
        if flags & 2:
            # Arrow binary payloads (as kproto.arrow.capture writes them): the body cut every few bytes
            step = 1 + api_version % 48
            payloads = [body[i : i + step] for i in range(0, len(body), step)]
            count = len(payloads)
            frames = pa.array(payloads, pa.binary())
            inputs = dict(
                directions=np.full(count, direction, np.int8),
                request_api_keys=np.full(count, api_key, np.int16),
                request_api_versions=np.full(count, api_version, np.int16),
                max_frame_size=1 << 20,
            )
        else:
            frames = body
            inputs = dict(
                directions=direction, request_api_keys=api_key, request_api_versions=api_version, max_frame_size=1 << 20
            )
        batch = kb.decode_frames(frames, body=json_body, **inputs, **options)
        # Produce / Fetch per topic-partition: the partition pass and its record-set summaries
        partitions = kb.partitions(frames, **inputs) if flags & 16 else None
    finally:
        kb._batch = saved
    columns = batch.to_pydict()
    if partitions is not None:
        columns["partitions"] = partitions.to_pylist()
    if "body" in columns:
        # compared as JSON values: the twins order the keys of fields a version lacks differently
        columns["body"] = [None if text is None else json.loads(text) for text in columns["body"]]
    return (columns, dict(batch.schema.metadata or {}))


def fuzz_batch(data: bytes):
    """kproto.arrow.frames.decode_frames: header (and JSON body) decode of many frames, row statuses.

    Bytes 0-2 choose requests or responses, a buffer or Arrow binary payloads, the
    JSON body column, record-set summaries, the per-partition pass (partitions),
    client ids as text, and the API key / version responses answer. decode_frames and partitions
    promise never to raise for bad frame bytes, so even a DecodeError fails here.
    """
    if len(data) < 3 or not _BATCHES:
        return ("skip", None)
    flags, api_key, api_version = data[0], data[1] % 100, data[2] % 20
    outcomes = {}
    for impl in _BATCHES:
        kind, value = call("batch", impl, _decode_batch, impl, data[3:], flags, api_key, api_version)
        if kind != "ok":
            raise FuzzFailure(f"batch[{impl}]: decode_frames raised {value} (it must mark the row instead)")
        outcomes[impl] = (kind, value)
    agree("batch", outcomes)
    return outcomes[IMPLEMENTATIONS[0]]


# ---------------------------------------------------------------- selection
def select(implementations) -> None:
    """Fuzz only these implementations ("c", "py"): faster, without the differential check.

    Used for long crash-hunting runs of the compiled decoders (and under the
    sanitizers), where the pure-Python twin would spend most of the time.
    """
    global IMPLEMENTATIONS
    chosen = tuple(i for i in IMPLEMENTATIONS if i in implementations)
    if not chosen:
        raise ValueError(f"none of {implementations} is available (have {IMPLEMENTATIONS})")
    IMPLEMENTATIONS = chosen
    for table in (_CODECS, _RECORDS, _BATCHES):
        for name in list(table):
            if name not in chosen:
                del table[name]


# ---------------------------------------------------------------- registry
TARGETS: dict[str, Callable[[bytes], object]] = {
    "request_header": fuzz_request_header,
    "request": fuzz_request,
    "response": fuzz_response,
    "records": fuzz_records,
    "capture": fuzz_capture,
    "tcp": fuzz_tcp,
    "framing": fuzz_framing,
    "batch": fuzz_batch,
}

#: Decoder families of the issue's figures: each maps to the targets that exercise it.
FAMILIES = {
    "headers": ("request_header",),
    "messages": ("request", "response"),
    "records": ("records",),
    "captures": ("capture", "tcp"),
    "framing": ("framing",),
    "batch": ("batch",),
}
