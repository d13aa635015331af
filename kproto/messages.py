"""Every Kafka message class, by name: ``kproto.messages.MetadataRequest``.

Classes are built from the generated schema tables on first use. Each class
covers all versions of its message; nested structs are attributes of it
(``MetadataResponse.MetadataResponseTopic``). Old API names resolve too
(``ListClientMetricsResourcesRequest`` is ``ListConfigResourcesRequest``).
"""

from __future__ import annotations

from kproto import api as _api  # noqa: F401  (attaches encode/decode to Message)
from kproto.schema import ALIASES, MESSAGES, Message, message_class

__all__ = ["Message", *sorted(MESSAGES), *sorted(ALIASES)]


def __getattr__(name: str) -> type:
    if name in MESSAGES or name in ALIASES:
        cls = message_class(name)
        globals()[name] = cls
        return cls
    raise AttributeError(f"module 'kproto.messages' has no message {name!r}")


def __dir__() -> list[str]:
    return __all__
