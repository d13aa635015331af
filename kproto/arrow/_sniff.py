"""What an input is, from its first bytes: the one rule ``kproto dump`` and ``kproto analyze``
use to tell a capture, a frame dump and a Parquet table from anything else."""

from __future__ import annotations

from kproto._common.capture import PCAP_FILE_MAGICS, PCAPNG_FILE_MAGIC
from kproto.limits import DEFAULT_MAX_FRAME_SIZE

PARQUET_MAGIC = b"PAR1"


def input_format(head: bytes, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> str | None:
    """ "pcap", "pcapng", "parquet", "frames" (size-prefixed frames), "empty", or None (none of
    these) for an input's first 4 bytes (fewer when the input is shorter)."""
    if not head:
        return "empty"
    if head in PCAP_FILE_MAGICS:
        return "pcap"
    if head == PCAPNG_FILE_MAGIC:
        return "pcapng"
    if head == PARQUET_MAGIC:
        return "parquet"
    if len(head) == 4 and 0 <= int.from_bytes(head, "big", signed=True) <= max_frame_size:
        return "frames"
    return None
