"""Credentials out of every output: the one place that says which fields carry them.

A capture of a cluster with SASL holds passwords and tokens: SaslAuthenticate's
``auth_bytes`` (a PLAIN password, SCRAM proofs, Kerberos tickets), delegation tokens'
``hmac``, SCRAM credentials being set. ``kproto dump`` and ``kproto analyze`` write
bodies with these fields replaced by ``"<redacted: N bytes>"`` unless
``--show-credentials`` is given. The raw SASL tokens that follow a SaslHandshake v0
are never output at all: the capture engine counts them (``sasl_tokens``,
``sasl_bytes``) instead of reading them as frames.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kproto._common.api_keys import ApiKey

__all__ = ["CREDENTIAL_FIELDS", "redact_body", "redact_bodies"]

#: API key -> the body fields (JSON names, at any depth) that carry credentials, in a
#: request or a response of that API.
CREDENTIAL_FIELDS: dict[int, frozenset[str]] = {
    ApiKey.SASL_AUTHENTICATE: frozenset({"auth_bytes"}),
    ApiKey.CREATE_DELEGATION_TOKEN: frozenset({"hmac"}),
    ApiKey.RENEW_DELEGATION_TOKEN: frozenset({"hmac"}),
    ApiKey.EXPIRE_DELEGATION_TOKEN: frozenset({"hmac"}),
    ApiKey.DESCRIBE_DELEGATION_TOKEN: frozenset({"hmac"}),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: frozenset({"salt", "salted_password"}),
}


def _redacted(value: Any) -> Any:
    if value is None:
        return None
    try:
        size = len(base64.b64decode(value, validate=True))
    except (binascii.Error, TypeError, ValueError):
        return "<redacted>"
    return f"<redacted: {size} bytes>"


def _walk(value: Any, names: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: (_redacted(v) if k in names else _walk(v, names)) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk(v, names) for v in value]
    return value


def redact_body(api_key: int | None, body: str | None) -> str | None:
    """A JSON body (the batch decoder's text) with its credential fields redacted."""
    names = CREDENTIAL_FIELDS.get(api_key) if api_key is not None else None
    if names is None or body is None:
        return body
    try:
        parsed = json.loads(body)
    except ValueError:
        return None  # not JSON: nothing of it may go out
    return json.dumps(_walk(parsed, names), separators=(",", ":"), ensure_ascii=False)


def redact_bodies(api_keys: Any, bodies: Any) -> Any:
    """A pyarrow string array of JSON bodies with credentials redacted; ``api_keys`` per row
    (for a response, its request's key; null or -1 when unknown)."""
    import numpy as np
    import pyarrow as pa

    keys = (
        api_keys.fill_null(-1).to_numpy(zero_copy_only=False)
        if isinstance(api_keys, (pa.Array, pa.ChunkedArray))
        else np.asarray(api_keys)
    )
    rows = np.flatnonzero(np.isin(keys, list(CREDENTIAL_FIELDS)))
    if not len(rows):
        return bodies
    values = bodies.to_pylist()
    for i in rows.tolist():
        values[i] = redact_body(int(keys[i]), values[i])
    return pa.array(values, bodies.type)
