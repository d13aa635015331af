"""Types of the compiled ``kproto._c._batch`` (source: ``_batch.pyx``).

The loops behind :mod:`kproto.arrow.frames`: frame headers (and optionally bodies as
JSON) of many frames into numpy columns. The pure twin is ``kproto/_py/batch.py``;
the column memory type and the column tables are the compiled module's own.
"""

from typing import Any, Final

import numpy as np
from typing_extensions import Buffer

IMPLEMENTATION: Final[str]
# Status name -> number; kproto.arrow.frames.Status is checked against it on import.
STATUS_NUMBERS: dict[str, int]
# The bitmap columns of scan()'s result, and its fixed-width columns with their dtypes.
BITMAP_NAMES: tuple[str, ...]
COLUMN_NAMES: tuple[str, ...]
COLUMN_TYPES: tuple[type[np.generic], ...]

class CBuffer:
    """Column memory (anonymous huge-page maps) exported read-write with the buffer protocol."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...

def count_frames(data: Buffer, max_frame_size: int) -> tuple[int, int]:
    """(frames, bytes framed) of a buffer of size-prefixed frames."""

def scan(
    data: Buffer,
    count: int = -1,
    offsets: np.ndarray | None = None,
    valid: np.ndarray | None = None,
    directions: np.ndarray | None = None,
    request_keys: np.ndarray | None = None,
    request_versions: np.ndarray | None = None,
    max_frame_size: int = 0x7FFFFFFF,
    default_direction: int = 0,
    default_key: int = -1,
    default_version: int = -1,
    body_offsets: bool = True,
) -> dict[str, Any]:
    """Decode the headers of frames into column arrays (see kproto/arrow/frames.py)."""

def json_bodies(
    data: Buffer,
    cols: dict[str, Any],
    offsets: np.ndarray | None = None,
    records_summary: bool = False,
    version_fields: bool = False,
) -> tuple[np.ndarray, bytes]:
    """JSON text of the body of every frame whose header read OK: (int64 offsets, UTF-8 bytes)."""

def partition_rows(data: Buffer, cols: dict[str, Any], offsets: np.ndarray | None = None) -> dict[str, Any]:
    """Produce requests and Fetch responses per topic-partition: the columns kproto.arrow.frames.partitions builds on."""
