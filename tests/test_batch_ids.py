"""The header loop's client ids past the stack cache (issue 18): the big cache and the pipelined table lookups.

Up to 512 distinct ids the C header loop checks a 512-slot cache on the stack first;
up to 2,048 a 16,384-slot cache on the heap; past that it reads blocks of frames
ahead of their id lookups. It adds new ids without leaving the loop in each mode.
These tests drive the three, and frames the loop must hand to the general loop in
the middle of a block (a new id that is not UTF-8, a tag section that is not empty),
and check that the C and pure-Python loops give the same rows and dictionary.
"""

from __future__ import annotations

import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import kproto.batch as kb
from kproto import messages as m
from kproto.batch import Status
from tests.test_batch import _first_appearance, on_each_implementation, prefixed

METADATA_V4 = m.MetadataRequest(topics=None).encode(4)
METADATA_V12 = m.MetadataRequest(topics=None).encode(12)

# Distinct ids that put the loop in each of its id modes: the stack cache (none), the
# big cache (past 512 ids) and the pipelined lookups (past 2,048).
WARM_UP = [f"warm-{k}".encode() for k in range(2100)]
MODES = {"stack cache": 0, "big cache": 700, "pipelined": 2100}


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


def decode_both(frames: list[tuple[bytes | None, str]], client_ids: str = "dictionary"):
    pytest.importorskip("kproto._c._batch")
    data = prefixed(*(raw_request(k, client_id, kind) for k, (client_id, kind) in enumerate(frames)))
    return on_each_implementation(("c", "py"), lambda: kb.decode_frames(data, client_ids=client_ids))


def expected_ids(frames: list[tuple[bytes | None, str]]) -> list[str | None]:
    return [None if client_id is None else client_id.decode("utf-8", "replace") for client_id, _ in frames]


# Ids around the table's key words (24 bytes with the length and the tag byte),
# not UTF-8, or repeated at once (a second frame of a block with an id new in it).
_IDS = st.one_of(
    st.none(),
    st.sampled_from([b"", b"a" * 21, b"a" * 22, b"a" * 23, b"a" * 40, b"\xff", b"ok\xc3", b"\xed\xa0\x80"]),
    st.integers(0, 2000).map(lambda k: f"consumer-orders-{k}".encode()),
    st.sampled_from(WARM_UP),
    st.binary(max_size=30),
)


@pytest.mark.parametrize("warm", [MODES["big cache"], MODES["pipelined"]], ids=["big cache", "pipelined"])
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(st.tuples(_IDS, st.sampled_from(["v1", "v2", "v2", "tagged"])), max_size=200))
def test_c_and_python_agree_past_the_cache(warm, frames):
    """After 700 or 2,100 distinct ids (the big cache, the pipelined loop), any ids, good
    or not: both loops agree."""
    frames = [(client_id, "v2") for client_id in WARM_UP[:warm]] + frames
    c, py = decode_both(frames)
    assert c.to_pylist() == py.to_pylist()
    assert c["client_id"].dictionary.to_pylist() == py["client_id"].dictionary.to_pylist()


def mid_block_frames(warm: int) -> list[tuple[bytes | None, str]]:
    """``warm`` distinct ids, then new ids amid frames the fast loop must hand over: ids
    that are not UTF-8, tag sections that are not empty, null and long ids."""
    frames: list[tuple[bytes | None, str]] = [(client_id, "v2") for client_id in WARM_UP[:warm]]
    for k in range(200):
        frames.append((f"new-{k}".encode(), "v1"))
        frames.append((f"new-{k}".encode(), "v2"))          # the same new id again, in the same block
        if k % 7 == 0:
            frames.append((f"tagged-{k}".encode(), "tagged"))
        if k % 11 == 0:
            frames.append((b"bad-\xff" + str(k).encode(), "v2"))
        if k % 13 == 0:
            frames.append((None, "v2"))
            frames.append(((f"long-{k}-" + "x" * 30).encode(), "v1"))
    return frames


@pytest.mark.parametrize("warm", list(MODES.values()), ids=list(MODES))
def test_frames_the_loop_hands_over_mid_block(warm):
    """New ids that are not UTF-8 or come with a tag section, amid a block of frames:
    those frames get their status or tag count, every other row its id, in both paths."""
    frames = mid_block_frames(warm)
    c, py = decode_both(frames)
    assert c.to_pylist() == py.to_pylist()
    rows = c.to_pylist()
    for row, (client_id, kind) in zip(rows, frames):
        if client_id is not None and b"\xff" in client_id:
            assert row["status"] == Status.MALFORMED
        else:
            assert row["status"] == Status.OK
            assert row["client_id"] == (None if client_id is None else client_id.decode())
            assert row["header_tag_count"] == (1 if kind == "tagged" else None if kind == "v1" else 0)
    good = [None if client_id is None else client_id.decode() for client_id, _ in frames
            if client_id is None or b"\xff" not in client_id]
    assert c["client_id"].dictionary.to_pylist() == _first_appearance(good)


def test_hundred_thousand_ids_in_the_pipelined_loop():
    """100,000 distinct ids (the table grows ten times, mostly inside the fast loop),
    each seen twice: every row keeps its id, in order of first appearance."""
    pytest.importorskip("kproto._c._batch")
    ids = [f"consumer-orders-{k}".encode() if k % 2 else f"producer-{k}".encode() for k in range(100_000)]
    order = ids + ids[::-1]
    frames = [(client_id, "v1" if k % 2 else "v2") for k, client_id in enumerate(order)]
    c, = on_each_implementation(("c",), lambda: kb.decode_frames(
        prefixed(*(raw_request(k, client_id, kind) for k, (client_id, kind) in enumerate(frames)))))
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert c["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]
    assert set(c["status"].to_pylist()) == {Status.OK}


def test_long_ids_found_again_after_the_table_grows():
    """Ids past the slot's 22 bytes of text, 3,000 of them (the table grows from 256 slots
    to 16,384, placing each id again by the hash bits its slot keeps), then each again
    in reverse: every later frame finds its id, the dictionary in order, as the twin."""
    ids = [f"{k}-{'long-client-id-' * (1 + k % 4)}".encode() for k in range(3_000)]
    frames = [(client_id, "v1" if k % 3 else "v2") for k, client_id in enumerate(ids + ids[::-1])]
    c, py = decode_both(frames)
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert c["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]
    assert c.to_pylist() == py.to_pylist()


def test_long_ids_that_differ_only_past_the_slot_s_bytes():
    """Ids whose first 22 bytes of text are the same (their slot words collide), told apart
    by the bytes past them, which the table compares with its copy of each id's text:
    seen in every lookup mode (few, then past 512 and 2,048 ids), each found again."""
    shared = "a-long-shared-prefix-of-the-id-"
    ids = [f"{shared}{k}".encode() for k in range(3_000)]
    frames = [(client_id, "v1" if k % 3 else "v2") for k, client_id in enumerate(ids + ids[::-1] + ids)]
    c, py = decode_both(frames)
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert c["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]
    assert c.to_pylist() == py.to_pylist()


@pytest.mark.parametrize("count", [512, 513, 640, 641, 2048, 2049, 2560, 2561, 10_240, 10_241])
def test_ids_around_the_mode_and_growth_counts(count):
    """The id cache a block is read with changes at 512 and 2,048 distinct ids; the table
    grows when over five eighths full (640, 2,560, 10,240 ids). Ids that reach each of
    those counts, then every id again in reverse and once more in order, all in the
    blocks right after the change: every row keeps its id, as the twin."""
    ids = [f"consumer-orders-{k}".encode() if k % 2 else f"p-{k}".encode() for k in range(count)]
    order = ids + ids[::-1] + ids
    frames = [(client_id, "v1" if k % 3 else "v2") for k, client_id in enumerate(order)]
    c, py = decode_both(frames)
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert c["client_id"].dictionary.to_pylist() == [client_id.decode() for client_id in ids]
    assert c.to_pylist() == py.to_pylist()


def test_table_slots_follow_the_five_eighths_rule():
    """The table's size for a count of ids (what bench_batch's C lookup loop is sized by):
    256 slots, grown 4x whenever the ids would fill more than five eighths of them."""
    batch = pytest.importorskip("kproto._c._batch")
    assert [batch.id_table_slots(n) for n in (0, 160, 161, 640, 641, 10_240, 10_241, 80_577)] == [
        256, 256, 1_024, 1_024, 4_096, 16_384, 65_536, 262_144]
    for bad in (-1, 2**31):
        with pytest.raises(ValueError, match="ids must be 0 to 2147483647"):
            batch.id_table_slots(bad)


# ------------------------------------------------------------------ ids as text (client_ids="string")
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(frames=st.lists(st.tuples(_IDS, st.sampled_from(["v1", "v2", "v2", "tagged"])), max_size=200))
def test_ids_as_text_are_the_dictionary_s_values(frames):
    """client_ids="string": a plain string column, row for row the dictionary's values, every
    other column the same; both loops give the same buffers."""
    c, py = decode_both(frames, client_ids="string")
    assert c.equals(py)
    assert c.schema.equals(kb.frame_schema(client_ids="string"))
    assert c.to_pylist() == decode_both(frames)[0].to_pylist()


@pytest.mark.parametrize("warm", list(MODES.values()), ids=list(MODES))
def test_ids_as_text_hand_over_the_same_frames(warm):
    """The frames the fast loop hands to the general loop (not UTF-8, tagged, long, null):
    with ids as text, the same statuses and ids as the dictionary gives."""
    frames = mid_block_frames(warm)
    c, py = decode_both(frames, client_ids="string")
    assert c.equals(py)
    assert c.to_pylist() == decode_both(frames)[0].to_pylist()


def test_hundred_thousand_ids_as_text():
    """100,000 distinct ids, each twice: every row its own id, with no table at all."""
    pytest.importorskip("kproto._c._batch")
    ids = [f"consumer-orders-{k}".encode() if k % 2 else f"producer-{k}".encode() for k in range(100_000)]
    frames = [(client_id, "v1" if k % 2 else "v2") for k, client_id in enumerate(ids + ids[::-1])]
    data = prefixed(*(raw_request(k, client_id, kind) for k, (client_id, kind) in enumerate(frames)))
    c, = on_each_implementation(("c",), lambda: kb.decode_frames(data, client_ids="string"))
    assert c["client_id"].type == pa.string()
    assert c["client_id"].to_pylist() == expected_ids(frames)
    assert set(c["status"].to_pylist()) == {Status.OK}


def test_ids_as_text_from_arrow_input_grow_their_buffer():
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
        c, py = on_each_implementation(("c", "py"), lambda frames=frames: kb.decode_frames(frames, client_ids="string"))
        assert c.equals(py)
        assert c.to_pylist() == kb.decode_frames(frames).to_pylist()
    assert c["client_id"].to_pylist() == [
        None if p is None or k % 7 == 0 else (f"{k}-" + "long-id-" * (k % 50)) for k, p in enumerate(payloads)]


def test_client_ids_argument_is_checked():
    with pytest.raises(ValueError, match="client_ids must be 'dictionary' or 'string', not 'dict'"):
        kb.decode_frames(b"", client_ids="dict")
    with pytest.raises(ValueError, match="client_ids must be"):
        kb.frame_schema(client_ids="text")
    empty = kb.decode_frames(b"", client_ids="string")
    assert empty.num_rows == 0 and empty.schema.equals(kb.frame_schema(client_ids="string"))


def test_ids_as_text_past_2_gib_are_refused():
    """Arrow string offsets are int32: the loops give none past 2 GiB of id text, and
    decode_frames says to decode fewer frames (made up columns: 2 GiB of ids is not a test)."""
    cols = {"has_client_id": None, "client_id_offsets": None, "client_id_text_offsets": None,
            "client_id_data": b"", "client_id": None}
    with pytest.raises(ValueError, match="the client ids of one call take over 2 GiB"):
        kb._client_id_column(0, cols)
