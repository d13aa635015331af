"""What pairing reads and what the exchanges' columns are cut with; no pairing rule lives here.

The frames' heads (:class:`Heads`: :func:`frame_heads` for the Spark worker, :func:`table_heads`
for the batch API), a pairing's outcome (:class:`Pairing`) and the helpers that take each
exchange's values from its request and response frames. The rules (which request pairs with
which response, in what order, with what status) are in :mod:`kproto.arrow.exchanges`, which
imports this module and re-exports its public names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import kproto.arrow.frames as kb

__all__ = [
    "Heads",
    "Pairing",
    "frame_heads",
    "table_heads",
    "masked",
    "picked",
    "exchange_times",
    "error_names",
]

REQUEST, RESPONSE = kb.REQUEST, kb.RESPONSE


# ------------------------------------------------------------------ the frames' heads
@dataclass
class Heads:
    """What the header pass gives, one value per frame: enough to pair the frames and build the exchanges."""

    capture: pa.Array  # the capture's name ("" for none)
    capture_codes: np.ndarray  # its code, for sorting and pairing
    connection: np.ndarray
    directions: np.ndarray  # int8
    sequence: np.ndarray
    corr: np.ndarray  # correlation id (0 where unread)
    corr_valid: np.ndarray
    keys: np.ndarray  # requests' API key and version (-1: none)
    versions: np.ndarray
    ts_first: pa.Array | None  # None: the frames have no timestamps
    ts_last: pa.Array | None
    sizes: np.ndarray | None


def _capture_codes(capture: pa.Array) -> np.ndarray:
    return capture.dictionary_encode().indices.to_numpy().astype(np.int64) if len(capture) else np.zeros(0, np.int64)


def frame_heads(frames: pa.Table, headers: pa.Table | pa.RecordBatch) -> Heads:
    """``frames`` (capture frame columns, the payload not needed) and their ``kb.decode_frames`` headers."""
    frames = frames.combine_chunks()
    headers = headers.combine_chunks() if isinstance(headers, pa.Table) else headers
    capture = kb.one_array(frames["capture"].cast(pa.string()).fill_null(""))
    return Heads(
        capture=capture,
        capture_codes=_capture_codes(capture),
        connection=frames["connection_id"].to_numpy().astype(np.int64),
        directions=frames["direction"].fill_null(0).to_numpy().astype(np.int8),
        sequence=frames["sequence"].to_numpy().astype(np.int64),
        corr=headers["correlation_id"].fill_null(0).to_numpy().astype(np.int64),
        corr_valid=headers["correlation_id"].is_valid().to_numpy(zero_copy_only=False),
        keys=headers["api_key"].fill_null(-1).to_numpy().astype(np.int16),
        versions=headers["api_version"].fill_null(-1).to_numpy().astype(np.int16),
        ts_first=kb.one_array(frames["ts_first_ns"]),
        ts_last=kb.one_array(frames["ts_last_ns"]),
        sizes=frames["size"].to_numpy().astype(np.int32),
    )


@dataclass
class Pairing:
    """The exchanges of a set of frames, in order, and what decoding their responses needs."""

    req: np.ndarray  # per exchange: its request's frame row, its response's (-1: none)
    resp: np.ndarray
    key_of: np.ndarray  # per frame: a paired response's request API key and version, else -1
    version_of: np.ndarray

    @property
    def owner_row(self) -> np.ndarray:
        """Each exchange's request row, else its response row."""
        return np.where(self.req >= 0, self.req, self.resp)


def table_heads(
    table: pa.Table, body: str | None, max_frame_size: int
) -> tuple[Heads, pa.Array, pa.Table, pa.Table, np.ndarray, np.ndarray]:
    """:func:`kproto.arrow.exchanges.pair`'s header pass: the frames' heads, their payloads, the decoded requests (bodies
    as asked) and response headers, and the request and response frame rows."""
    names = set(table.column_names)
    for required in ("connection_id", "direction", "sequence", "payload"):
        if required not in names:
            raise ValueError(f"frames need a {required!r} column (the kproto.arrow.capture frame shape)")
    rows = table.num_rows
    if "capture" in names:
        capture = kb.one_array(table["capture"].cast(pa.string()).fill_null(""))
        capture_codes = _capture_codes(capture)
    else:
        capture = pa.nulls(rows, pa.string())
        capture_codes = np.zeros(rows, np.int64)
    direction = table["direction"].fill_null(0).to_numpy().astype(np.int8)
    has_ts = "ts_first_ns" in names and "ts_last_ns" in names
    payload = kb.one_array(table["payload"])

    req_rows = np.flatnonzero(direction == REQUEST)
    resp_rows = np.flatnonzero(direction == RESPONSE)
    # Ids as text: the output's client_id is a string column, and a dictionary costs a
    # table lookup a frame that grows with the capture's distinct ids.
    requests = kb.decode_frames(
        payload.take(pa.array(req_rows)), body=body, max_frame_size=max_frame_size, client_ids="string"
    )
    # A response's correlation id is its first 4 bytes, whatever the API.
    resp_headers = kb.decode_frames(payload.take(pa.array(resp_rows)), directions=RESPONSE)
    corr = np.zeros(rows, np.int64)
    corr_valid = np.zeros(rows, bool)
    keys = np.full(rows, -1, np.int16)
    versions = np.full(rows, -1, np.int16)
    for side, decoded in ((req_rows, requests), (resp_rows, resp_headers)):
        corr[side] = decoded["correlation_id"].fill_null(0).to_numpy().astype(np.int64)
        corr_valid[side] = decoded["correlation_id"].is_valid().to_numpy(zero_copy_only=False)
    keys[req_rows] = requests["api_key"].fill_null(-1).to_numpy().astype(np.int16)
    versions[req_rows] = requests["api_version"].fill_null(-1).to_numpy().astype(np.int16)
    heads = Heads(
        capture,
        capture_codes,
        table["connection_id"].to_numpy().astype(np.int64),
        direction,
        table["sequence"].to_numpy().astype(np.int64),
        corr,
        corr_valid,
        keys,
        versions,
        kb.one_array(table["ts_first_ns"]) if has_ts else None,
        kb.one_array(table["ts_last_ns"]) if has_ts else None,
        None,
    )
    return heads, payload, requests, resp_headers, req_rows, resp_rows


# ------------------------------------------------------------------ an exchange's values from its frames
def masked(values: np.ndarray, index: np.ndarray, present: np.ndarray, type_: pa.DataType) -> pa.Array:
    """values[index] where present, else null."""
    chosen = values[np.where(present, index, 0)] if len(values) else np.zeros(len(index), values.dtype)
    return pa.array(chosen, type_, mask=~present)


def picked(array: pa.Array, index: np.ndarray, present: np.ndarray) -> pa.Array:
    """array[index] where present, else null."""
    if len(array) == 0:
        return pa.nulls(len(index), array.type)
    return array.take(pa.array(np.where(present, index, 0), mask=~present))


def exchange_times(h: Heads, req: np.ndarray, resp: np.ndarray) -> dict[str, pa.Array]:
    """request_ts_ns (first byte out), response_ts_ns (last byte back) and their difference."""
    m = len(req)
    if h.ts_first is None or h.ts_last is None:
        return {name: pa.nulls(m, pa.int64()) for name in ("request_ts_ns", "response_ts_ns", "latency_ns")}
    has_req, has_resp = req >= 0, resp >= 0
    req_rows, resp_rows = np.where(has_req, req, 0), np.where(has_resp, resp, 0)
    n = len(h.directions)

    def valid(ts: pa.Array, rows: np.ndarray, present: np.ndarray) -> np.ndarray:
        return present & ts.is_valid().to_numpy(zero_copy_only=False)[rows] if n and ts.null_count else present

    req_valid, resp_valid = valid(h.ts_first, req_rows, has_req), valid(h.ts_last, resp_rows, has_resp)
    first = (h.ts_first.fill_null(0) if h.ts_first.null_count else h.ts_first).to_numpy().astype(np.int64)
    last = (h.ts_last.fill_null(0) if h.ts_last.null_count else h.ts_last).to_numpy().astype(np.int64)
    request_ts = first[req_rows] if n else np.zeros(m, np.int64)
    response_ts = last[resp_rows] if n else np.zeros(m, np.int64)
    return {
        "request_ts_ns": pa.array(request_ts, pa.int64(), mask=~req_valid),
        "response_ts_ns": pa.array(response_ts, pa.int64(), mask=~resp_valid),
        "latency_ns": pa.array(response_ts - request_ts, pa.int64(), mask=~(req_valid & resp_valid)),
    }


def error_names(codes: pa.Array) -> pa.Array:
    """Kafka's name of each error code (null for null)."""
    from kproto.errors import error_name

    names = {code: error_name(code) for code in pc.unique(codes.drop_null()).to_pylist()}
    keys = pa.array(list(names), pa.int16())
    index = pc.index_in(codes, value_set=keys)
    return pa.array(list(names.values()), pa.string()).take(index)
