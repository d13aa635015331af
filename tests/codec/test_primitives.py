"""Every Kafka primitive on both implementations: known vectors, boundaries, round trips, bad input."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproto import _impl, schema
from kproto.errors import (
    DecodeError,
    EncodeError,
    InvalidLengthError,
    InvalidVarintError,
    TruncatedError,
)
from tests.twin_selection import implementations

INT_TYPES = {
    "int8": (-(2**7), 2**7 - 1, 1),
    "int16": (-(2**15), 2**15 - 1, 2),
    "int32": (-(2**31), 2**31 - 1, 4),
    "int64": (-(2**63), 2**63 - 1, 8),
    "uint16": (0, 2**16 - 1, 2),
    "uint32": (0, 2**32 - 1, 4),
    "varint": (-(2**31), 2**31 - 1, None),
    "varlong": (-(2**63), 2**63 - 1, None),
    "unsigned_varint": (0, 2**32 - 1, None),
}


def roundtrip(impl, method: str, value):
    buffer = impl.load("buffer")
    w = buffer.Writer()
    getattr(w, "write_" + method)(value)
    data = w.getvalue()
    r = buffer.Reader(data)
    out = getattr(r, "read_" + method)()
    assert r.remaining == 0
    return data, out


# Varint vectors: the protocol guide's zigzag table plus multi-byte encodings.
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (-2, "03"),
    (2, "04"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (2**31 - 1, "feffffff0f"),
    (-(2**31), "ffffffff0f"),
]
UNSIGNED_VARINT_VECTORS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "8001"),
    (300, "ac02"),
    (16383, "ff7f"),
    (16384, "808001"),
    (2**32 - 1, "ffffffff0f"),
]
VARLONG_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (2**63 - 1, "feffffffffffffffff01"),
    (-(2**63), "ffffffffffffffffff01"),
]


@pytest.mark.parametrize("value,hexbytes", VARINT_VECTORS)
def test_varint_vectors(impl, value, hexbytes):
    data, out = roundtrip(impl, "varint", value)
    assert data.hex() == hexbytes and out == value


@pytest.mark.parametrize("value,hexbytes", UNSIGNED_VARINT_VECTORS)
def test_unsigned_varint_vectors(impl, value, hexbytes):
    data, out = roundtrip(impl, "unsigned_varint", value)
    assert data.hex() == hexbytes and out == value


@pytest.mark.parametrize("value,hexbytes", VARLONG_VECTORS)
def test_varlong_vectors(impl, value, hexbytes):
    data, out = roundtrip(impl, "varlong", value)
    assert data.hex() == hexbytes and out == value


@pytest.mark.parametrize("type_name", sorted(INT_TYPES))
def test_integer_boundaries(impl, type_name):
    lo, hi, width = INT_TYPES[type_name]
    for value in (lo, lo + 1, 0, hi - 1, hi):
        data, out = roundtrip(impl, type_name, value)
        assert out == value
        if width:
            assert len(data) == width
    w = impl.load("buffer").Writer()
    for bad in (lo - 1, hi + 1):
        with pytest.raises(EncodeError):
            getattr(w, "write_" + type_name)(bad)
    with pytest.raises(EncodeError):
        getattr(w, "write_" + type_name)("1")


def test_fixed_width_big_endian(impl):
    w = impl.load("buffer").Writer()
    w.write_int16(0x0102)
    w.write_int32(-2)
    w.write_uint16(0xFFFE)
    w.write_uint32(0x80000000)
    w.write_float64(1.5)
    w.write_bool(True)
    w.write_bool(False)
    assert w.getvalue().hex() == "0102fffffffefffe800000003ff80000000000000100"


def test_uuid(impl):
    value = uuid.UUID("0123456789abcdef0123456789abcdef")
    data, out = roundtrip(impl, "uuid", value)
    assert data == value.bytes and out == value and isinstance(out, uuid.UUID)
    data, out = roundtrip(impl, "uuid", uuid.UUID(int=0))
    assert data == bytes(16) and out == uuid.UUID(int=0)
    assert str(out) == "00000000-0000-0000-0000-000000000000"


@pytest.mark.parametrize(
    "method,expected",
    [
        ("string", "0000"),
        ("nullable_string", "0000"),
        ("compact_string", "01"),
        ("compact_nullable_string", "01"),
    ],
)
def test_empty_strings(impl, method, expected):
    data, out = roundtrip(impl, method, "")
    assert data.hex() == expected and out == ""


@pytest.mark.parametrize(
    "method,expected",
    [
        ("nullable_string", "ffff"),
        ("compact_nullable_string", "00"),
        ("nullable_bytes", "ffffffff"),
        ("compact_nullable_bytes", "00"),
    ],
)
def test_null_strings_and_bytes(impl, method, expected):
    data, out = roundtrip(impl, method, None)
    assert data.hex() == expected and out is None


@pytest.mark.parametrize("method", ["string", "compact_string", "bytes", "compact_bytes"])
def test_null_refused_where_not_nullable(impl, method):
    w = impl.load("buffer").Writer()
    with pytest.raises(EncodeError):
        getattr(w, "write_" + method)(None)


@pytest.mark.parametrize(
    "method,expected",
    [
        ("bytes", "00000000"),
        ("nullable_bytes", "00000000"),
        ("compact_bytes", "01"),
        ("compact_nullable_bytes", "01"),
    ],
)
def test_empty_bytes(impl, method, expected):
    data, out = roundtrip(impl, method, b"")
    assert data.hex() == expected and out == b""


def test_string_lengths_and_utf8(impl):
    data, out = roundtrip(impl, "string", "héllo")
    assert data[:2] == (6).to_bytes(2, "big") and out == "héllo"
    data, out = roundtrip(impl, "compact_string", "héllo")
    assert data[0] == 7 and out == "héllo"
    with pytest.raises(EncodeError):
        impl.load("buffer").Writer().write_string("x" * 32768)
    roundtrip(impl, "string", "x" * 32767)


def test_invalid_utf8_is_a_decode_error(impl):
    r = impl.load("buffer").Reader(b"\x00\x02\xff\xfe")
    with pytest.raises(DecodeError) as info:
        r.read_string()
    assert info.value.offset == 2


# Sequences to put at every place of an ASCII string: valid ones of each length,
# cut ones, overlong forms, a surrogate, one above U+10FFFF and stray bytes.
UTF8_PIECES = [
    b"\xc3\xa9",
    b"\xe2\x82\xac",
    b"\xf0\x9f\x98\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\xf0\x9f\x98",
    b"\xc0\xaf",
    b"\xe0\x80\xaf",
    b"\xed\xa0\x80",
    b"\xf4\x90\x80\x80",
    b"\x80",
    b"\xff",
]


def test_utf8_rule_is_pythons_at_every_place(impl):
    """The message decoder's validator checks ASCII eight bytes at a time and may end on
    the last eight bytes at once: a piece anywhere in strings of 0-24 bytes, around
    those words' edges, is accepted exactly when Python's strict decoder accepts it.
    The string is a topic name in MetadataRequest v1, inside an array that a lazy
    decode builds on first read: the validator alone makes decode fail."""
    codec = impl.load("codec")
    plan = schema.plan("MetadataRequest", 1)
    for piece in UTF8_PIECES:
        for length in range(len(piece), 25):
            for at in range(length - len(piece) + 1):
                raw = b"a" * at + piece + b"b" * (length - len(piece) - at)
                try:
                    expected = raw.decode("utf-8")
                except UnicodeDecodeError:
                    expected = None
                body = b"\x00\x00\x00\x01" + len(raw).to_bytes(2, "big") + raw
                if expected is None:
                    with pytest.raises(DecodeError) as info:
                        codec.decode_struct(body, plan)
                    assert info.value.offset == 6 and "topics[0].name" in str(info.value), raw
                else:
                    assert codec.decode_struct(body, plan).topics[0].name == expected, raw


def test_arrays_classic_and_compact(impl):
    buffer = impl.load("buffer")
    w = buffer.Writer()
    w.write_array_count(None)
    w.write_array_count(0)
    w.write_array_count(None, compact=True)
    w.write_array_count(0, compact=True)
    w.write_array_count(3, compact=True)
    assert w.getvalue().hex() == "ffffffff00000000000104"
    r = buffer.Reader(w.getvalue() + b"\x00\x00\x00")
    assert r.read_array_count() is None
    assert r.read_array_count() == 0
    assert r.read_array_count(compact=True) is None
    assert r.read_array_count(compact=True) == 0
    assert r.read_array_count(compact=True) == 3


def test_null_array_refused_when_not_nullable(impl):
    r = impl.load("buffer").Reader(b"\xff\xff\xff\xff")
    with pytest.raises(InvalidLengthError):
        r.read_array_count(nullable=False)


def test_huge_count_fails_before_allocating(impl):
    # 2^31 - 1 elements claimed in a 20-byte buffer: refused at once.
    data = (2**31 - 1).to_bytes(4, "big") + bytes(16)
    r = impl.load("buffer").Reader(data)
    with pytest.raises(InvalidLengthError) as info:
        r.read_array_count()
    assert info.value.offset == 4
    r = impl.load("buffer").Reader(bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x0F]) + bytes(15))
    with pytest.raises(InvalidLengthError):
        r.read_array_count(compact=True)
    r = impl.load("buffer").Reader(b"\x7f\xff\xff\xff" + bytes(16))
    with pytest.raises(TruncatedError):
        r.read_bytes()


def test_negative_lengths_rejected(impl):
    buffer = impl.load("buffer")
    with pytest.raises(InvalidLengthError):
        buffer.Reader(b"\xff\xfe").read_nullable_string()
    with pytest.raises(InvalidLengthError):
        buffer.Reader(b"\xff\xff").read_string()
    with pytest.raises(InvalidLengthError):
        buffer.Reader(b"\x00").read_compact_string()
    with pytest.raises(InvalidLengthError):
        buffer.Reader(b"\xff\xff\xff\xfe").read_nullable_bytes()


@pytest.mark.parametrize(
    "data",
    [
        bytes([0x80] * 5 + [0x01]),  # six bytes
        bytes([0xFF, 0xFF, 0xFF, 0xFF, 0x1F]),  # fifth byte carries bits above 32
    ],
)
def test_overlong_unsigned_varint_rejected(impl, data):
    with pytest.raises(InvalidVarintError) as info:
        impl.load("buffer").Reader(data).read_unsigned_varint()
    assert info.value.offset == 4


def test_overlong_varlong_rejected(impl):
    with pytest.raises(InvalidVarintError):
        impl.load("buffer").Reader(bytes([0x80] * 10 + [0x01])).read_varlong()
    with pytest.raises(InvalidVarintError):
        impl.load("buffer").Reader(bytes([0xFF] * 9 + [0x02])).read_varlong()


@pytest.mark.parametrize(
    "method,size",
    [("int16", 2), ("int32", 4), ("int64", 8), ("uint16", 2), ("uint32", 4), ("float64", 8), ("uuid", 16)],
)
def test_every_read_checks_its_full_width(impl, method, size):
    for available in range(size):
        r = impl.load("buffer").Reader(bytes(available))
        with pytest.raises(TruncatedError) as info:
            getattr(r, "read_" + method)()
        assert info.value.offset == 0
        assert r.offset == 0


def test_truncated_string_body(impl):
    with pytest.raises(TruncatedError):
        impl.load("buffer").Reader(b"\x00\x05abc").read_string()
    with pytest.raises(TruncatedError):
        impl.load("buffer").Reader(b"\x06abc").read_compact_string()
    with pytest.raises(TruncatedError):
        impl.load("buffer").Reader(b"\x80").read_unsigned_varint()


def test_reader_accepts_any_contiguous_buffer(impl):
    import numpy as np

    payload = b"\x00\x03abc\x00\x00\x00\x07"
    for source in (
        payload,
        bytearray(payload),
        memoryview(payload),
        np.frombuffer(payload, dtype=np.uint8),
        np.frombuffer(bytearray(payload), np.uint8),
    ):
        r = impl.load("buffer").Reader(source)
        assert r.read_string() == "abc" and r.read_int32() == 7


def test_tagged_fields_section(impl):
    buffer = impl.load("buffer")
    w = buffer.Writer()
    w.write_tagged_fields({5: b"\x01\x02", 0: b"", 300: b"x"})
    data = w.getvalue()
    assert data.hex() == "03000005020102ac020178"
    r = buffer.Reader(data)
    assert r.read_tagged_fields() == {0: b"", 5: b"\x01\x02", 300: b"x"}
    assert r.remaining == 0
    # Tags must strictly ascend: a repeated or decreasing tag is an error.
    with pytest.raises(DecodeError):
        buffer.Reader(bytes([2, 5, 0, 5, 0])).read_tagged_fields()
    with pytest.raises(DecodeError):
        buffer.Reader(bytes([2, 5, 0, 1, 0])).read_tagged_fields()
    with pytest.raises(TruncatedError):
        buffer.Reader(bytes([1, 5, 3, 0])).read_tagged_fields()


def test_tagged_fields_exact_bytes(impl):
    w = impl.load("buffer").Writer()
    w.write_tagged_fields({1: b"\xaa", 0: b"\xbb\xcc"})
    assert w.getvalue().hex() == "020002bbcc0101aa"


# ------------------------------------------------------------------ property tests
PRIMITIVE_STRATEGIES = {
    "bool": st.booleans(),
    "float64": st.floats(allow_nan=False),
    "uuid": st.uuids(),
    "string": st.text(max_size=50),
    "nullable_string": st.none() | st.text(max_size=50),
    "compact_string": st.text(max_size=50),
    "compact_nullable_string": st.none() | st.text(max_size=50),
    "bytes": st.binary(max_size=50),
    "nullable_bytes": st.none() | st.binary(max_size=50),
    "compact_bytes": st.binary(max_size=50),
    "compact_nullable_bytes": st.none() | st.binary(max_size=50),
    "unsigned_varlong": st.integers(0, 2**64 - 1),
    **{name: st.integers(lo, hi) for name, (lo, hi, _w) in INT_TYPES.items()},
}


@pytest.mark.parametrize("method", sorted(PRIMITIVE_STRATEGIES))
def test_primitive_roundtrip_and_twin_bytes(method):
    chosen = implementations()

    @given(PRIMITIVE_STRATEGIES[method])
    def check(value):
        encoded = set()
        for name in chosen:
            buffer = _impl.load("buffer", name)
            w = buffer.Writer()
            getattr(w, "write_" + method)(value)
            data = w.getvalue()
            encoded.add(data)
            r = buffer.Reader(data)
            assert getattr(r, "read_" + method)() == value
            assert r.remaining == 0
        assert len(encoded) == 1, "C and pure-Python writers disagree"

    check()


@given(st.binary(max_size=40))
def test_random_bytes_never_escape_as_other_errors(data):
    for name in implementations():
        buffer = _impl.load("buffer", name)
        for method in (
            "string",
            "compact_nullable_string",
            "bytes",
            "compact_bytes",
            "varint",
            "varlong",
            "uuid",
            "tagged_fields",
            "array_count",
            "int64",
        ):
            try:
                getattr(buffer.Reader(data), "read_" + method)()
            except DecodeError:
                pass


def test_public_buffer_module_is_the_active_implementation():
    """kproto.buffer is the public path; the private one documented before still works."""
    import doctest

    import kproto.buffer

    assert kproto.buffer.Reader is _impl.load("buffer").Reader
    assert kproto.buffer.Writer is _impl.load("buffer").Writer
    assert doctest.testmod(kproto.buffer).failed == 0
    with pytest.raises(kproto.buffer.TruncatedError):
        kproto.buffer.Reader(b"\x00").read_int32()
