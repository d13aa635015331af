"""A small structure-blind byte mutator for the built-in fuzz engine.

The mutations are the ones that break length-prefixed binary formats: bit flips,
boundary integers written over length and count fields (0, -1, INT_MAX, ...),
varint continuation runs, deleted, duplicated and inserted ranges, truncation,
and splicing two inputs together. Everything is drawn from a ``random.Random``
so a run is reproducible from its seed.
"""

from __future__ import annotations

import random
import struct

MAX_SIZE = 1 << 16  # inputs never grow beyond this: the decoders' cost is linear anyway

_INTERESTING_8 = (0x00, 0x01, 0x02, 0x7E, 0x7F, 0x80, 0x81, 0xFE, 0xFF)
_INTERESTING_16 = (0, 1, 2, 0x7FFF, 0x8000, 0xFFFF, 0xFFFE, 0x0100, 0x00FF)
_INTERESTING_32 = (0, 1, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE, 0x00010000, 0x40000000)


def _position(rng: random.Random, data: bytearray) -> int:
    return rng.randrange(len(data)) if data else 0


def _flip_bit(rng, data, _pool):
    if data:
        i = _position(rng, data)
        data[i] ^= 1 << rng.randrange(8)


def _random_byte(rng, data, _pool):
    if data:
        data[_position(rng, data)] = rng.randrange(256)


def _interesting_byte(rng, data, _pool):
    if data:
        data[_position(rng, data)] = rng.choice(_INTERESTING_8)


def _arith_byte(rng, data, _pool):
    if data:
        i = _position(rng, data)
        data[i] = (data[i] + rng.choice((-1, 1)) * rng.randint(1, 35)) & 0xFF


def _interesting_int(rng, data, _pool):
    if len(data) < 2:
        return
    if len(data) >= 4 and rng.random() < 0.5:
        i = rng.randrange(len(data) - 3)
        data[i : i + 4] = struct.pack(">I", rng.choice(_INTERESTING_32))
    else:
        i = rng.randrange(len(data) - 1)
        data[i : i + 2] = struct.pack(">H", rng.choice(_INTERESTING_16))


def _small_length(rng, data, _pool):
    """A length field nudged by a little: off-by-one lengths are where bounds checks hide."""
    if len(data) >= 4:
        i = rng.randrange(len(data) - 3)
        value = struct.unpack_from(">i", data, i)[0] + rng.randint(-8, 8)
        data[i : i + 4] = struct.pack(">i", max(-(2**31), min(2**31 - 1, value)))


def _varint_run(rng, data, _pool):
    i = _position(rng, data)
    data[i:i] = bytes([rng.choice((0x80, 0xFF))]) * rng.randint(1, 12)


def _delete_range(rng, data, _pool):
    if data:
        i = _position(rng, data)
        del data[i : i + rng.randint(1, 16)]


def _insert_bytes(rng, data, _pool):
    i = _position(rng, data)
    data[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 16)))


def _duplicate_range(rng, data, _pool):
    if data:
        i = _position(rng, data)
        chunk = data[i : i + rng.randint(1, 64)]
        j = _position(rng, data)
        data[j:j] = chunk


def _truncate(rng, data, _pool):
    if data:
        del data[rng.randrange(len(data)) :]


def _splice(rng, data, pool):
    if pool:
        other = rng.choice(pool)
        if other:
            data[_position(rng, data) :] = other[rng.randrange(len(other)) :]


MUTATIONS = (
    _flip_bit,
    _random_byte,
    _interesting_byte,
    _arith_byte,
    _interesting_int,
    _small_length,
    _varint_run,
    _delete_range,
    _insert_bytes,
    _duplicate_range,
    _truncate,
    _splice,
)


def mutate(rng: random.Random, data: bytes, pool) -> bytes:
    """A mutant of ``data``: one to five mutations, never longer than MAX_SIZE."""
    out = bytearray(data)
    for _ in range(1 + min(4, int(rng.expovariate(1.0)))):
        rng.choice(MUTATIONS)(rng, out, pool)
    return bytes(out[:MAX_SIZE])
