"""Requests paired with their responses: the exchanges of a capture's frames, in one place.

Every user of pairing calls this module: ``kproto.arrow.exchanges.pair`` (the batch API, :func:`pair`),
the Spark worker and its range pipeline (:func:`frame_heads`, :func:`pair_heads`,
:func:`exchanges_table`) and ``kproto dump`` (:class:`OpenRequests`, open requests carried
from one batch to the next). The rules written here and nowhere else:

- **pairing** (:func:`pair_rows`): per (capture, connection, correlation id), the n-th
  request pairs with the n-th response in sequence order (Kafka answers in order on a
  connection, and a client may reuse a correlation id);
- **order** (:func:`pair_heads`): per capture and connection, requests in order, then the
  responses without a request;
- **pair status** (:func:`pair_status`): see :class:`PairStatus`; a Produce with acks=0
  (:func:`acks_zero`) expects no response;
- **the exchanges schema** (:data:`EXCHANGE_FIELDS`): one type per column, for the batch
  API's table and the analysis' ``exchanges`` table;
- **a topic named by its ID** (:func:`resolve_topic_ids`): the name the responses give
  that ID, the rule of the analysis' topics table.

What holds no rule (the frames' heads, :class:`Heads` and :func:`frame_heads`; a pairing's
outcome, :class:`Pairing`; the helpers that cut an exchange's columns from its frames) is in
:mod:`kproto.arrow.exchange_heads`, re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

import kproto.arrow.frames as kb
from kproto._common.api_keys import ApiKey
from kproto._common.batch import PairStatus
from kproto.arrow.exchange_heads import (
    Heads,
    Pairing,
    error_names,
    exchange_times,
    frame_heads,
    masked,
    picked,
    table_heads,
)
from kproto.limits import DEFAULT_MAX_FRAME_SIZE

if TYPE_CHECKING:
    from kproto.messages import ProduceRequest

__all__ = [
    "PairStatus",
    "EXCHANGE_FIELDS",
    "exchanges_schema",
    "pair_schema",
    "pair",
    "pair_rows",
    "occurrence_rank",
    "pair_status",
    "status_names",
    "acks_zero",
    "OpenRequests",
    "Heads",
    "Pairing",
    "frame_heads",
    "pair_heads",
    "unanswered_produce",
    "exchanges_table",
    "resolve_topic_ids",
    "name_topics",
    "MAX_OPEN_REQUESTS",
]

REQUEST, RESPONSE = kb.REQUEST, kb.RESPONSE
#: Produce: the one API whose requests may expect no response (acks=0).
_PRODUCE = int(ApiKey.PRODUCE)

# ------------------------------------------------------------------ the schema
#: Every column an exchanges table may have, in order, with its one type. ``pair_status``
#: (and the frame statuses) are int16: Spark, which reads the analysis' tables, has no
#: unsigned types, and every status fits.
EXCHANGE_FIELDS: tuple[pa.Field, ...] = (
    pa.field("capture", pa.string()),
    pa.field("connection_id", pa.int64()),
    pa.field("correlation_id", pa.int32()),
    pa.field("api_key", pa.int16()),
    pa.field("api_version", pa.int16()),
    pa.field("client_id", pa.string()),
    pa.field("pair_status", pa.int16()),
    pa.field("pair_status_name", pa.string()),
    pa.field("request_row", pa.int64()),
    pa.field("response_row", pa.int64()),
    pa.field("request_sequence", pa.int64()),
    pa.field("response_sequence", pa.int64()),
    pa.field("request_ts_ns", pa.int64()),
    pa.field("response_ts_ns", pa.int64()),
    pa.field("latency_ns", pa.int64()),
    pa.field("request_status", pa.int16()),
    pa.field("response_status", pa.int16()),
    pa.field("request_size", pa.int32()),
    pa.field("response_size", pa.int32()),
    pa.field("error_code", pa.int16()),
    pa.field("error_name", pa.string()),
    pa.field("deprecated", pa.bool_()),
    pa.field("removed_in_4x", pa.bool_()),
    pa.field("client_software_name", pa.string()),
    pa.field("client_software_version", pa.string()),
    pa.field("software_problems", pa.string()),
    # Produce / Fetch: the one topic the request and response address; a topic named by
    # its ID in the frames carries the name responses give that ID (resolve_topic_ids).
    pa.field("topic", pa.string()),
    pa.field("topic_id", pa.string()),
    pa.field("request_body", pa.string()),
    pa.field("response_body", pa.string()),
)
_FIELD = {f.name: f for f in EXCHANGE_FIELDS}
#: The batch API's columns (:func:`pair`): the frames' rows, no analysis.
PAIR_COLUMNS = (
    "capture",
    "connection_id",
    "correlation_id",
    "api_key",
    "api_version",
    "client_id",
    "pair_status",
    "request_row",
    "response_row",
    "request_sequence",
    "response_sequence",
    "request_ts_ns",
    "response_ts_ns",
    "latency_ns",
    "request_status",
    "response_status",
)
#: The analysis' ``exchanges`` table: no frame rows (a task's rows mean nothing in the output), no bodies.
TABLE_COLUMNS = tuple(
    f.name for f in EXCHANGE_FIELDS if f.name not in {"request_row", "response_row", "request_body", "response_body"}
)
BODY_COLUMNS = ("request_body", "response_body")


def _schema(names: Iterable[str]) -> pa.Schema:
    return pa.schema([_FIELD[name] for name in names])


def exchanges_schema() -> pa.Schema:
    """The analysis' ``exchanges`` table (kproto analyze, the Spark worker)."""
    return _schema(TABLE_COLUMNS)


def pair_schema(body: str | None = None) -> pa.Schema:
    """The schema of :func:`pair`'s output."""
    return _schema(PAIR_COLUMNS + (BODY_COLUMNS if body == "json" else ()))


def status_names(values: pa.Array, enum_type: Any) -> pa.Array:
    """The member names of status numbers (``Status``, ``PairStatus``); null for null or unknown ones."""
    names = [member.name for member in sorted(enum_type, key=int)]
    lookup = pa.array(names + [None], pa.string())
    index = pc.fill_null(values.cast(pa.int32()), len(names))
    index = pc.if_else(pc.less(index, len(names)), index, len(names))
    return lookup.take(index)


# ------------------------------------------------------------------ the pairing rule
def occurrence_rank(*keys: np.ndarray, order_by: np.ndarray) -> np.ndarray:
    """For each row, how many earlier rows (in ``order_by`` order) share its keys."""
    count = len(order_by)
    if count == 0:
        return np.zeros(0, np.int64)
    order = np.lexsort((order_by, *reversed(keys)))
    changed = np.zeros(count, bool)
    changed[0] = True
    for key in keys:
        sorted_key = key[order]
        changed[1:] |= sorted_key[1:] != sorted_key[:-1]
    group_start = np.maximum.accumulate(np.where(changed, np.arange(count), 0))
    rank = np.empty(count, np.int64)
    rank[order] = np.arange(count) - group_start
    return rank


def pair_rows(
    capture_codes: np.ndarray,
    connection_ids: np.ndarray,
    directions: np.ndarray,
    correlation_ids: np.ndarray,
    correlation_valid: np.ndarray,
    sequences: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """kproto's pairing rule, on rows of frames (every argument: one value per row).

    Per (capture, connection, correlation id), the n-th request pairs with the
    n-th response in ``sequences`` order: Kafka answers in order on a connection,
    and a client may reuse a correlation id. A frame whose correlation id could
    not be read (``correlation_valid`` false) pairs with nothing.

    Returns ``(request_rows, response_rows)``, int64, one entry per pair, per
    request without a response and per response without a request; ``-1`` marks
    the missing side. Their order is unspecified (:func:`pair_heads` orders them).
    Rows of other directions are left out.
    """
    rows = np.arange(len(directions), dtype=np.int64)
    if not len(rows):
        return rows, rows
    is_request = directions == REQUEST
    key = np.where(correlation_valid, correlation_ids.astype(np.int64), np.where(is_request, -(2**40), -(2**41)) - rows)
    rank = occurrence_rank(capture_codes, connection_ids, directions.astype(np.int64), key, order_by=sequences)
    req, resp = np.flatnonzero(is_request), np.flatnonzero(directions == RESPONSE)
    left = pa.table({"k0": capture_codes[req], "k1": connection_ids[req], "k2": key[req], "k3": rank[req], "req": req})
    right = pa.table(
        {"k0": capture_codes[resp], "k1": connection_ids[resp], "k2": key[resp], "k3": rank[resp], "resp": resp}
    )
    joined = left.join(right, ["k0", "k1", "k2", "k3"], join_type="full outer")
    return (
        joined["req"].fill_null(-1).to_numpy().astype(np.int64),
        joined["resp"].fill_null(-1).to_numpy().astype(np.int64),
    )


def acks_zero(payload: bytes) -> bool:
    """Whether a Produce request asks for no response (acks=0)."""
    from kproto import api  # the object codec, needed only for the few unanswered Produce requests

    try:
        return cast("ProduceRequest", api.decode_request(payload).body).acks == 0
    except Exception:  # an undecodable request: it stays an unpaired request
        return False


def pair_status(req: np.ndarray, resp: np.ndarray, no_response_expected: np.ndarray) -> np.ndarray:
    """The :class:`PairStatus` of each exchange (int16), from its request and response rows
    (-1: none) and whether its request expects no response (an acks=0 Produce)."""
    has_req, has_resp = req >= 0, resp >= 0
    status = np.full(len(req), PairStatus.PAIRED, np.int16)
    status[has_req & ~has_resp] = PairStatus.UNPAIRED_REQUEST
    status[has_req & ~has_resp & no_response_expected] = PairStatus.NO_RESPONSE_EXPECTED
    status[~has_req] = PairStatus.UNPAIRED_RESPONSE
    return status


# ------------------------------------------------------------------ frames to exchanges
def pair_heads(h: Heads) -> Pairing:
    """The frames paired (:func:`pair_rows`), in the exchanges' order: per capture and
    connection, the requests in order, then the responses without a request."""
    n = len(h.directions)
    req, resp = pair_rows(h.capture_codes, h.connection, h.directions, h.corr, h.corr_valid, h.sequence)
    has_req, has_resp = req >= 0, resp >= 0
    owner_row = np.where(has_req, req, resp)
    order = (
        np.lexsort(
            (
                np.where(has_resp, resp, n),
                np.where(has_req, req, n),
                h.connection[owner_row],
                h.capture_codes[owner_row],
            )
        )
        if len(owner_row)
        else np.zeros(0, np.int64)
    )
    req, resp = req[order], resp[order]
    both = (req >= 0) & (resp >= 0)
    key_of = np.full(n, -1, np.int16)
    version_of = np.full(n, -1, np.int16)
    key_of[resp[both]] = h.keys[req[both]]
    version_of[resp[both]] = h.versions[req[both]]
    return Pairing(req, resp, key_of, version_of)


def unanswered_produce(h: Heads, p: Pairing) -> np.ndarray:
    """Per frame: a Produce request without a response (the ones :func:`acks_zero` is asked about)."""
    rows = p.req[(p.req >= 0) & (p.resp < 0)]
    mask = np.zeros(len(h.directions), bool)
    mask[rows[h.keys[rows] == _PRODUCE]] = True
    return mask


def acks_zero_frames(payload: pa.Array, asked: np.ndarray) -> np.ndarray:
    """Per frame: an ``asked`` one (see :func:`unanswered_produce`) whose Produce has acks=0."""
    found = np.zeros(len(asked), bool)
    for i in np.flatnonzero(asked).tolist():
        found[i] = acks_zero(payload[i].as_py())
    return found


def pair(
    frames: pa.Table | pa.RecordBatch, *, body: str | None = None, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
) -> pa.Table:
    """Pair requests with their responses: one row per request, plus one per orphan response.

    ``frames`` has the shape of ``kproto.arrow.capture`` output: ``connection_id``,
    ``direction`` (0 request, 1 response), ``sequence`` (order within connection
    and direction), ``payload`` (frame without size prefix) and optionally
    ``capture``, ``ts_first_ns``, ``ts_last_ns``. Requests and responses pair by
    (capture, connection, correlation id), the n-th request with a correlation id
    to the n-th response with it, in sequence order (Kafka answers in order).
    Responses are decoded with their request's api_key and version.

    ``latency_ns`` = response ``ts_last_ns`` - request ``ts_first_ns`` (first
    byte out to last byte back), null without timestamps. ``pair_status``: see
    :class:`PairStatus`; a Produce with acks=0 is ``NO_RESPONSE_EXPECTED``.
    ``body="json"`` adds the decoded request and response bodies.
    """
    table = pa.Table.from_batches([frames]) if isinstance(frames, pa.RecordBatch) else frames
    table = table.combine_chunks()
    rows = table.num_rows
    heads, payload, requests, resp_headers, req_rows, resp_rows = table_heads(table, body, max_frame_size)
    capture = heads.capture
    p = pair_heads(heads)
    req, resp = p.req, p.resp
    has_req, has_resp = req >= 0, resp >= 0
    owner = p.owner_row
    # Each frame's row among the requests, or among the responses.
    position = np.zeros(rows, np.int64)
    position[req_rows], position[resp_rows] = np.arange(len(req_rows)), np.arange(len(resp_rows))
    req_i, resp_i = (
        position[np.where(has_req, req, 0)] if rows else req,
        position[np.where(has_resp, resp, 0)] if rows else resp,
    )

    api_key = picked(requests["api_key"], req_i, has_req)
    api_version = picked(requests["api_version"], req_i, has_req)
    # Decode each paired response with its request's API and version.
    answered = has_req & has_resp
    responses = kb.decode_frames(
        payload.take(pa.array(resp[answered])) if answered.any() else pa.array([], pa.binary()),
        directions=RESPONSE,
        request_api_keys=p.key_of[resp[answered]],
        request_api_versions=p.version_of[resp[answered]],
        body=body,
        max_frame_size=max_frame_size,
    )
    no_response = acks_zero_frames(payload, unanswered_produce(heads, p))
    status = pair_status(req, resp, no_response[np.where(has_req, req, 0)] if rows else has_req)
    # A response's status: decoded with its request's API, or alone (NO_REQUEST_INFO and the like).
    response_status = np.zeros(len(req), np.int16)
    response_status[has_resp] = resp_headers["status"].to_numpy()[resp_i[has_resp]] if has_resp.any() else 0
    if answered.any():
        response_status[answered] = responses["status"].to_numpy()
    columns = {
        "capture": capture.take(pa.array(owner)) if rows else pa.array([], pa.string()),
        "connection_id": pa.array(heads.connection[owner] if rows else np.zeros(0, np.int64)),
        "correlation_id": masked(heads.corr, owner, heads.corr_valid[owner] if rows else has_req, pa.int32()),
        "api_key": api_key,
        "api_version": api_version,
        "client_id": picked(requests["client_id"], req_i, has_req),
        "pair_status": pa.array(status),
        "request_row": pa.array(np.where(has_req, req, 0), pa.int64(), mask=~has_req),
        "response_row": pa.array(np.where(has_resp, resp, 0), pa.int64(), mask=~has_resp),
        "request_sequence": masked(heads.sequence, req, has_req, pa.int64()),
        "response_sequence": masked(heads.sequence, resp, has_resp, pa.int64()),
        **exchange_times(heads, req, resp),
        "request_status": picked(requests["status"], req_i, has_req).cast(pa.int16()),
        "response_status": pa.array(response_status, mask=~has_resp),
    }
    if body == "json":
        answered_row = np.cumsum(answered) - 1  # row of `responses` for each answered exchange
        columns["request_body"] = picked(requests["body"], req_i, has_req)
        columns["response_body"] = picked(responses["body"], answered_row, answered)
    return pa.table(columns, schema=pair_schema(body))


def exchanges_table(
    h: Heads,
    p: Pairing,
    facts: pa.Table,
    parts: pa.Table,
    partition_frame: np.ndarray,
    topic_names: pa.Table | None = None,
) -> pa.Table:
    """The analysis' ``exchanges`` table of paired frames.

    ``facts``: what each frame's exchange takes from it once decoded (status, client_id,
    deprecated, removed_in_4x, error_code, client software and problems, acks_zero: see
    kproto.analyze.spark.decode.decode_chunk); ``parts``: the topic and topic_id of every frame's
    partitions, ``partition_frame`` their frame rows; ``topic_names``: the (topic_id, topic)
    pairs the frames' responses give, which name a topic addressed by its ID.
    """
    n, req, resp = len(h.directions), p.req, p.resp
    facts = facts.combine_chunks()
    fact = {name: kb.one_array(facts[name]) for name in facts.column_names}
    has_req, has_resp = req >= 0, resp >= 0
    owner_row = p.owner_row
    topic, topic_id = _exchange_topics(parts, partition_frame, req, resp, n, topic_names)
    req_rows = np.where(has_req, req, 0)
    acks = fact["acks_zero"].to_numpy(zero_copy_only=False)
    status = pair_status(req, resp, acks[req_rows] if n else has_req)
    frame_status = fact["status"].to_numpy(zero_copy_only=False)
    req_index = pa.array(req_rows, mask=~has_req)
    error_codes = fact["error_code"].take(pa.array(np.where(has_resp, resp, 0), mask=~has_resp))
    assert h.sizes is not None
    columns = {
        "capture": h.capture.take(pa.array(owner_row)) if n else pa.array([], pa.string()),
        "connection_id": pa.array(h.connection[owner_row] if n else np.zeros(0, np.int64)),
        "correlation_id": masked(h.corr, owner_row, h.corr_valid[owner_row] if n else has_req, pa.int32()),
        "api_key": masked(h.keys, req, has_req, pa.int16()),
        "api_version": masked(h.versions, req, has_req, pa.int16()),
        "client_id": fact["client_id"].take(req_index).cast(pa.string()),
        "pair_status": pa.array(status),
        "pair_status_name": status_names(pa.array(status), PairStatus),
        "request_sequence": masked(h.sequence, req, has_req, pa.int64()),
        "response_sequence": masked(h.sequence, resp, has_resp, pa.int64()),
        **exchange_times(h, req, resp),
        "request_status": masked(frame_status, req, has_req, pa.int16()),
        "response_status": masked(frame_status, resp, has_resp, pa.int16()),
        "request_size": masked(h.sizes, req, has_req, pa.int32()),
        "response_size": masked(h.sizes, resp, has_resp, pa.int32()),
        "error_code": error_codes.cast(pa.int16()),
        "error_name": error_names(error_codes),
        **{
            name: fact[name].take(req_index)
            for name in (
                "deprecated",
                "removed_in_4x",
                "client_software_name",
                "client_software_version",
                "software_problems",
            )
        },
        "topic": topic,
        "topic_id": topic_id,
    }
    return pa.table(columns, schema=exchanges_schema())


def resolve_topic_ids(rows: Iterable[dict]) -> tuple[dict[str, str], dict[str, str]]:
    """(name of each topic ID, the ID of each name that has exactly one) from (topic_id, topic) rows.

    An ID named differently by two responses takes the least name (Spark's min);
    a name with several IDs (a topic deleted and created again) gets none.
    """
    names: dict[str, str] = {}
    for r in rows:
        if r["topic_id"] is not None and r["topic"] is not None:
            names[r["topic_id"]] = min(r["topic"], names.get(r["topic_id"], r["topic"]))
    ids: dict[str, list[str]] = {}
    for topic_id, name in names.items():
        ids.setdefault(name, []).append(topic_id)
    return names, {name: found[0] for name, found in ids.items() if len(found) == 1}


def _exchange_topics(
    parts: pa.Table,
    partition_frame: np.ndarray,
    req: np.ndarray,
    resp: np.ndarray,
    n: int,
    topic_names: pa.Table | None,
) -> tuple[pa.Array, pa.Array]:
    """(topic, topic_id) of each exchange whose request and response address exactly one topic,
    else null; a topic addressed by its ID alone is named by ``topic_names`` (resolve_topic_ids)."""
    m = len(req)
    exchange_of = np.full(n, -1, np.int64)
    exchange_of[req[req >= 0]] = np.flatnonzero(req >= 0)
    exchange_of[resp[resp >= 0]] = np.flatnonzero(resp >= 0)
    addressed = pa.table(
        {
            "exchange": pa.array(exchange_of[partition_frame], pa.int64()),
            "topic": parts["topic"],
            "topic_id": parts["topic_id"],
        }
    )
    distinct = addressed.group_by(["exchange", "topic", "topic_id"]).aggregate([])
    counts = distinct.group_by("exchange").aggregate([([], "count_all"), ("topic", "min"), ("topic_id", "min")])
    single = counts.filter(pc.equal(counts["count_all"], 1))
    exchange = single["exchange"].to_numpy()
    in_exchange = exchange >= 0  # a frame in no exchange (no correlation id) addresses nothing here
    index = np.full(m, -1, np.int64)
    index[exchange[in_exchange]] = np.flatnonzero(in_exchange)
    pick = pa.array(index, mask=index < 0)
    topic = single["topic_min"].combine_chunks().take(pick).cast(pa.string())
    topic_id = single["topic_id_min"].combine_chunks().take(pick).cast(pa.string())
    if topic_names is not None and topic_names.num_rows and pc.any(pc.is_valid(topic_id)).as_py():
        topic = name_topics(topic, topic_id, run_topic_names(topic_names))
    return topic, topic_id


def run_topic_names(topic_names: pa.Table) -> dict[str, str]:
    """The name of each topic ID that the (topic_id, topic) rows of ``topic_names`` give (resolve_topic_ids)."""
    pairs = topic_names.select(["topic_id", "topic"]).group_by(["topic_id", "topic"]).aggregate([])
    return resolve_topic_ids(pairs.to_pylist())[0]


def name_topics(topic: pa.Array, topic_id: pa.Array, name_of: dict[str, str]) -> pa.Array:
    """The topic of each exchange: the name ``name_of`` (:func:`run_topic_names`) gives its
    ``topic_id``, else ``topic`` as it was. An exchange addressed by ID carries no name of its
    own, so the name a wider set of responses gives replaces the one fewer gave (a task's, at
    the end of the run)."""
    if not name_of:
        return topic
    ids = pa.array(list(name_of), pa.string())
    named = pa.array(list(name_of.values()), pa.string()).take(pc.index_in(topic_id, value_set=ids))
    return pc.coalesce(named, topic)


# ------------------------------------------------------------------ open requests, batch to batch
#: Requests waiting for their response that :class:`OpenRequests` remembers (the oldest are
#: forgotten beyond this: their responses then decode as NO_REQUEST_INFO).
MAX_OPEN_REQUESTS = 100_000


class OpenRequests:
    """Requests of one input still waiting for their response, across its batches.

    :func:`pair_rows` pairs the requests held here and a batch's frames; what it
    leaves unanswered is held for the next batch, except Produce requests with
    acks=0 (no response comes, by design). At most ``limit`` are held (the oldest
    go first).
    """

    def __init__(self, limit: int = MAX_OPEN_REQUESTS) -> None:
        self.limit = limit
        self.connection = np.zeros(0, np.int64)
        self.correlation_id = np.zeros(0, np.int64)
        self.sequence = np.zeros(0, np.int64)
        self.api_key = np.zeros(0, np.int16)
        self.api_version = np.zeros(0, np.int16)
        self.client_id = np.zeros(0, object)

    def __len__(self) -> int:
        return len(self.connection)

    def match(self, frames: pa.RecordBatch, headers: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per frame of the batch: the API key, version and client id of its request.

        Requests give their own; a response its request's (-1, -1, None without one).
        ``headers``: ``kb.decode_frames`` of the batch's payloads and directions.
        """
        held = len(self)
        n = frames.num_rows
        directions = frames["direction"].to_numpy()
        corr = headers["correlation_id"].fill_null(0).to_numpy().astype(np.int64)
        corr_valid = headers["correlation_id"].is_valid().to_numpy(zero_copy_only=False)
        api_key = np.where(directions == REQUEST, headers["api_key"].fill_null(-1).to_numpy(), -1).astype(np.int16)
        api_version = np.where(directions == REQUEST, headers["api_version"].fill_null(-1).to_numpy(), -1).astype(
            np.int16
        )
        client_id = np.array(headers["client_id"].to_pylist(), object)
        all_key = np.concatenate([self.api_key, api_key])
        all_version = np.concatenate([self.api_version, api_version])
        all_client = np.concatenate([self.client_id, client_id])
        connection = np.concatenate([self.connection, frames["connection_id"].to_numpy()])
        sequence = np.concatenate([self.sequence, frames["sequence"].to_numpy()])
        all_corr = np.concatenate([self.correlation_id, corr])
        all_valid = np.concatenate([np.ones(held, bool), corr_valid])
        req, resp = pair_rows(
            np.zeros(held + n, np.int64),
            connection,
            np.concatenate([np.zeros(held, np.int8), directions]),
            all_corr,
            all_valid,
            sequence,
        )
        answered = (req >= 0) & (resp >= 0)
        rows = resp[answered] - held
        api_key[rows], api_version[rows], client_id[rows] = (
            all_key[req[answered]],
            all_version[req[answered]],
            all_client[req[answered]],
        )
        waiting = np.sort(req[(req >= 0) & (resp < 0) & all_valid[np.maximum(req, 0)]])
        payload = frames["payload"]
        waiting = np.array(
            [
                i
                for i in waiting.tolist()
                if i < held or all_key[i] != _PRODUCE or not acks_zero(payload[i - held].as_py())
            ],
            np.int64,
        )[-self.limit :]
        self.connection, self.correlation_id, self.sequence = connection[waiting], all_corr[waiting], sequence[waiting]
        self.api_key, self.api_version, self.client_id = all_key[waiting], all_version[waiting], all_client[waiting]
        return api_key, api_version, client_id
