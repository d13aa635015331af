"""What names a library, rather than versions any software may send: the fingerprint's rule "only what is a
library's own names it".

A library's own evidence is its default client.id (:func:`id_pattern`: ``producer-1``, ``rdkafka``, ``kgo``),
the first requests only its clients opened with (:func:`common_start`), and the order in which only its
clients, or those of few libraries, sent their requests (:func:`own`). Versions within what a library sent are
no such evidence: any client that negotiates, or was written by hand, may send them. The table that holds
the recorded clients and the version-range classifier that asks this are in kproto.analyze.fingerprint.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from kproto.analyze.fingerprint_runs import API_VERSIONS, Pair

#: One recorded client: its library, its requests in order, its ApiVersions requests per connection.
Client = tuple[str, tuple[Pair, ...], int | None]


def id_pattern(client_id: str) -> re.Pattern:
    """A default client.id as a pattern: numbers vary (``producer-1``), and so do user and host in
    ``user@host (program)`` (segmentio kafka-go 0.2)."""
    program = re.fullmatch(r"[^@\s]+@\S+ \((.+)\)", client_id)
    if program:
        return re.compile(r"[^@\s]+@\S+ \(" + re.escape(program.group(1)) + r"\)")
    return re.compile("".join(r"\d+" if part.isdigit() else re.escape(part) for part in re.split(r"(\d+)", client_id)))


def common_start(order: Sequence[Pair], opening: tuple[Pair, ...], key=lambda pair: pair) -> int:
    """How many first requests ``order`` shares with ``opening`` (compared by ``key``)."""
    count = 0
    for seen, recorded in zip(order, opening):
        if key(tuple(seen)) != key(recorded):
            break
        count += 1
    return count


def own(
    clients: Iterable[Client], libraries: int, compared: list[Pair], hinted: set[str], handshakes: int | None
) -> tuple[list[str], str]:
    """The libraries something the client sent is the own of (the strongest evidence first), and what it sent
    as the recorded ``clients`` show it (why a library outside them is not trusted); ``libraries``: how many the
    table holds. A library's own: its default client.id (``hinted``); or, among the
    recorded clients that asked ApiVersions as often on one connection, the first requests (at least two,
    versions and all) that clients of that library, and of no other, opened with; or the order in which it
    sent its requests (as far as it went), with their versions or by API alone, when clients of that library
    and of fewer than half of the table's sent them so (or of that library alone). Versions within what a
    library sent are no such evidence: any client that negotiates, or was written by hand, may send them;
    nor is the order nearly every client opens with (ApiVersions, Metadata, then the work)."""
    # A client that sent ApiVersions with no count given (handshakes None) is compared with every client that asked.
    count_unknown = handshakes is None and any(api == API_VERSIONS for api, _v in compared)
    peers = [(lib, order) for lib, order, h in clients if h == handshakes or (count_unknown and h is not None)]
    best: dict[str, int] = {}
    for lib, order in peers:
        best[lib] = max(best.get(lib, 0), common_start(compared, order))
    opening = max(best.values(), default=0)
    opened = sorted(lib for lib, n in best.items() if n == opening)
    keys = [api for api, _v in compared]
    same = {lib for lib, order in peers if list(order[: len(compared)]) == compared}
    alike = {lib for lib, order in peers if [api for api, _v in order[: len(keys)]] == keys}
    found = sorted(hinted) + (opened if opening >= 2 and len(opened) == 1 else [])
    for sharing in (same, alike):
        if len(sharing) == 1 or 2 * len(sharing) < libraries:
            found += sorted(sharing)
    found = list(dict.fromkeys(found))
    asked = (
        "never asked ApiVersions"
        if handshakes is None and not count_unknown
        else "asked ApiVersions"
        if handshakes is None
        else f"asked ApiVersions {handshakes} time(s) on one connection"
    )
    named = f"is {', '.join(sorted(hinted))}'s default" if hinted else "is no library's default"
    if opening < 2:
        first = "its first requests, versions and all, are no such client's beyond the first"
    else:
        first = f"its first {opening} requests, versions and all, are those of {' and '.join(opened)} clients"
    if not alike:
        order_text = "none sent its requests in this order"
    else:
        order_text = (
            f"clients of {len(alike)} of the {libraries} libraries ({', '.join(sorted(alike))}) "
            "sent its requests in this order"
        )
    return found, f"its client.id {named}; among the recorded clients that, like it, {asked}: {first}, {order_text}"
