"""Messages by name and APIs by key or name: the lookups every other schema module starts from.

This module stands on the generated facts alone (``_messages``), so the modules above it
(the schema package, its docstrings, :mod:`kproto.api`, :mod:`kproto.versions`) import it
without importing one another.
"""

from __future__ import annotations

from typing import Any

from kproto.schema import _messages
from kproto.schema._messages import ALIASES

# The generated table, typed for the checker: each message is a dict of heterogeneous
# facts (strings, version ranges, nested field tuples), so its values are Any.
MESSAGES: dict[str, dict[str, Any]] = _messages.MESSAGES


def spec(name: str) -> dict:
    """The generated facts of a message, header or data type (old API names resolve too)."""
    try:
        return MESSAGES[ALIASES.get(name, name)]
    except KeyError:
        raise KeyError(f"unknown Kafka message {name!r}") from None


def _by_api_key(kind: str) -> dict[int, str]:
    return {m["api_key"]: name for name, m in MESSAGES.items() if m["type"] == kind}


REQUESTS = _by_api_key("request")
RESPONSES = _by_api_key("response")


def api_keys() -> list[int]:
    """Every API key with a schema, ascending."""
    return sorted(REQUESTS)


def request_name(api_key: int) -> str | None:
    return REQUESTS.get(api_key)


def response_name(api_key: int) -> str | None:
    return RESPONSES.get(api_key)


def _stem(name: str) -> str:
    """``"ProduceRequest"`` -> ``"produce"``: an API's name as the table keys it."""
    return name[: -len("Request")].lower()


# The one API name table: each request's name without "Request", any case, and the old
# names Kafka renamed (ALIASES) still resolving to their new API.
_KEY_BY_NAME = {_stem(name): key for key, name in REQUESTS.items()}
for _old, _new in ALIASES.items():
    if _old.endswith("Request") and _stem(_new) in _KEY_BY_NAME:
        _KEY_BY_NAME[_stem(_old)] = _KEY_BY_NAME[_stem(_new)]


def api_key_of(api: int | str) -> int:
    """The API key of ``api``: a key, or a name (``"Produce"``, ``"ProduceRequest"``, any case)."""
    if isinstance(api, bool):
        raise TypeError("an API is a key or a name, not a bool")
    if isinstance(api, int):
        return api
    text = str(api).strip()
    if text.lstrip("-").isdigit():
        return int(text)
    lowered = text.lower()
    if lowered.endswith("request") or lowered.endswith("response"):
        lowered = lowered[: -len("request")] if lowered.endswith("request") else lowered[: -len("response")]
    try:
        return _KEY_BY_NAME[lowered]
    except KeyError:
        raise KeyError(f"unknown Kafka API {api!r}") from None
