"""Client ids in the header loops (issues 18 and 39): text by default, a dictionary when asked.

Both loops check each request's id (its tag byte, UTF-8) and append its text in row
order; the C loop's fast path copies short ids in one fixed-size copy and hands frames
it cannot take (an id that is not UTF-8, a tag section that is not empty) to the
general loop in the middle of a block. These tests drive those paths and check that
the C and pure-Python loops give the same buffers, and that ``client_ids="dictionary"``
gives the same values, each distinct id once in order of first appearance.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kproto.arrow.frames as kb
from kproto import messages as m
from kproto.arrow.frames import Status
from tests.arrow.test_batch import _first_appearance, on_each_implementation, prefixed

METADATA_V4 = m.MetadataRequest(topics=None).encode(4)
METADATA_V12 = m.MetadataRequest(topics=None).encode(12)

# Distinct ids before the frames under test: with 4,000 of them those frames cross the fast
# loop's 4,096-frame blocks.
WARM_UP = [f"warm-{k}".encode() for k in range(4000)]


def raw_request(correlation_id: int, client_id: bytes | None, kind: str) -> bytes:
    """A Metadata request with any client id bytes: kind "v1" (header v1), "v2" (an
    empty tag section) or "tagged" (a tag section of one field)."""
    if client_id is None:
        head = struct.pack(">hhih", 3, 4 if kind == "v1" else 12, correlation_id, -1)
    else:
        head = struct.pack(">hhih", 3, 4 if kind == "v1" else 12, correlation_id, len(client_id)) + client_id
    if kind == "v1":
        return head + METADATA_V4
    return head + (b"\x01\x05\x01z" if kind == "tagged" else b"\x00") + METADATA_V12


def frames_data(frames: list[tuple[bytes | None, str]]) -> bytes:
    return prefixed(*(raw_request(k, client_id, kind) for k, (client_id, kind) in enumerate(frames)))


def decode_both(frames: list[tuple[bytes | None, str]], client_ids: str = "string"):
    pytest.importorskip("kproto._c._batch")
    data = frames_data(frames)
    return on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids=client_ids))


def expected_ids(frames: list[tuple[bytes | None, str]]) -> list[str | None]:
    return [None if client_id is None else client_id.decode("utf-8", "replace") for client_id, _ in frames]


def check_dictionary(text: pa.RecordBatch, dictionary: pa.RecordBatch) -> None:
    """``client_ids="dictionary"``: the same rows as the text, the column dictionary-encoded
    (int32 indexes), each distinct id once in order of first appearance."""
    assert dictionary.schema.equals(kb.frame_schema(client_ids="dictionary"))
    assert dictionary.to_pylist() == text.to_pylist()
    assert dictionary["client_id"].dictionary.to_pylist() == _first_appearance(text["client_id"].to_pylist())


# Ids around the fast loop's 24 bytes (the length, up to 22 bytes of text and the tag byte),
# not UTF-8, or repeated at once.
_IDS = st.one_of(
    st.none(),
    st.sampled_from([b"", b"a" * 21, b"a" * 22, b"a" * 23, b"a" * 40, b"\xff", b"ok\xc3", b"\xed\xa0\x80"]),
    st.integers(0, 2000).map(lambda k: f"consumer-orders-{k}".encode()),
    st.sampled_from(WARM_UP[:50]),
    st.binary(max_size=30),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(st.tuples(_IDS, st.sampled_from(["v1", "v2", "v2", "tagged"])), max_size=200))
def test_c_and_python_agree_on_any_ids(frames):
    """Any ids, good or not: both loops give the same buffers, a plain string column; the
    dictionary, asked for, holds the same values on both."""
    c, py = decode_both(frames)
    assert c.equals(py)
    assert c.schema.equals(kb.frame_schema()) and c["client_id"].type == pa.string()
    c_dict, py_dict = decode_both(frames, client_ids="dictionary")
    assert c_dict.equals(py_dict)
    check_dictionary(c, c_dict)


def mid_block_frames(warm: int) -> list[tuple[bytes | None, str]]:
    """``warm`` distinct ids, then new ids amid frames the fast loop must hand over: ids
    that are not UTF-8, tag sections that are not empty, null and long ids."""
    frames: list[tuple[bytes | None, str]] = [(client_id, "v2") for client_id in WARM_UP[:warm]]
    for k in range(200):
        frames.append((f"new-{k}".encode(), "v1"))
        frames.append((f"new-{k}".encode(), "v2"))  # the same id again at once
        if k % 7 == 0:
            frames.append((f"tagged-{k}".encode(), "tagged"))
        if k % 11 == 0:
            frames.append((b"bad-\xff" + str(k).encode(), "v2"))
        if k % 13 == 0:
            frames.append((None, "v2"))
            frames.append(((f"long-{k}-" + "x" * 30).encode(), "v1"))
    return frames


@pytest.mark.parametrize("warm", [0, len(WARM_UP)], ids=["first block", "across blocks"])
def test_frames_the_loop_hands_over_mid_block(warm):
    """Ids that are not UTF-8 or come with a tag section, amid a block of frames: those
    frames get their status or tag count, every other row its id, in both loops."""
    frames = mid_block_frames(warm)
    c, py = decode_both(frames)
    assert c.equals(py)
    for row, (client_id, kind) in zip(c.to_pylist(), frames):
        if client_id is not None and b"\xff" in client_id:
            assert row["status"] == Status.MALFORMED
            assert row["client_id"] is None
        else:
            assert row["status"] == Status.OK
            assert row["client_id"] == (None if client_id is None else client_id.decode())
            assert row["header_tag_count"] == (1 if kind == "tagged" else None if kind == "v1" else 0)
    check_dictionary(c, decode_both(frames, client_ids="dictionary")[0])


def test_hundred_thousand_ids():
    """100,000 distinct ids, each twice: every row its own id; the dictionary, asked for,
    holds each once in order of first appearance."""
    pytest.importorskip("kproto._c._batch")
    ids = [f"consumer-orders-{k}".encode() if k % 2 else f"producer-{k}".encode() for k in range(100_000)]
    frames = [(client_id, "v1" if k % 2 else "v2") for k, client_id in enumerate(ids + ids[::-1])]
    data = frames_data(frames)
    (c,) = on_each_implementation(("c",), lambda: kb.decode_frames(data))
    assert c["client_id"].type == pa.string()
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert set(c["status"].to_pylist()) == {Status.OK}
    (as_dictionary,) = on_each_implementation(("c",), lambda: kb.decode_frames(data, client_ids="dictionary"))
    assert as_dictionary["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]
    assert as_dictionary["client_id"].to_pylist() == expected_ids(frames)


def test_long_ids_that_share_their_first_bytes():
    """Ids past the fast loop's 22 bytes of text, sharing a long prefix and told apart by
    the bytes past it, then each again in reverse and in order: every row keeps its id,
    the dictionary holds each once, as the twin."""
    shared = "a-long-shared-prefix-of-the-id-"
    ids = [f"{shared}{k}".encode() for k in range(3_000)]
    frames = [(client_id, "v1" if k % 3 else "v2") for k, client_id in enumerate(ids + ids[::-1] + ids)]
    c, py = decode_both(frames)
    assert c.equals(py)
    assert c["client_id"].to_pylist() == expected_ids(frames)
    c_dict, py_dict = decode_both(frames, client_ids="dictionary")
    assert c_dict.equals(py_dict)
    assert c_dict["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]


def test_ids_from_arrow_input_grow_their_buffer():
    """Arrow input (its frame count known) of ids far longer than the 16 bytes a frame the
    text is first sized for, among null entries and null ids: the text grows, each row
    keeps its id, as the twin."""
    pytest.importorskip("kproto._c._batch")
    payloads: list[bytes | None] = []
    for k in range(3_000):
        client_id = None if k % 7 == 0 else (f"{k}-" + "long-id-" * (k % 50)).encode()
        payloads.append(None if k % 11 == 0 else raw_request(k, client_id, "v1" if k % 2 else "v2"))
    for arrow_type in (pa.binary(), pa.large_binary()):
        frames = pa.array(payloads, arrow_type)
        c, py = on_each_implementation(("c", "py"), lambda frames=frames: kb.decode_frames(frames))
        assert c.equals(py)
        check_dictionary(c, kb.decode_frames(frames, client_ids="dictionary"))
    assert c["client_id"].to_pylist() == [
        None if p is None or k % 7 == 0 else (f"{k}-" + "long-id-" * (k % 50)) for k, p in enumerate(payloads)
    ]


def test_client_ids_argument_is_checked():
    with pytest.raises(ValueError, match="client_ids must be 'string' or 'dictionary', not 'dict'"):
        kb.decode_frames(b"", client_ids="dict")
    with pytest.raises(ValueError, match="client_ids must be"):
        kb.frame_schema(client_ids="text")
    for client_ids in ("string", "dictionary"):
        empty = kb.decode_frames(b"", client_ids=client_ids)
        assert empty.num_rows == 0 and empty.schema.equals(kb.frame_schema(client_ids=client_ids))
    assert kb.frame_schema().field("client_id").type == pa.string()


def test_ids_past_2_gib_are_refused():
    """Arrow string offsets are int32: the loops give none past 2 GiB of id text, and
    decode_frames says to decode fewer frames (made up columns: 2 GiB of ids is not a test)."""
    cols = {"has_client_id": None, "client_id_offsets": None, "client_id_data": b"", "client_id": None}
    for client_ids in ("string", "dictionary"):
        with pytest.raises(ValueError, match="the client ids of one call take over 2 GiB"):
            kb._client_id_column(0, cols, client_ids)
