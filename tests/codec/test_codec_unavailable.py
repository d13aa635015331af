"""A compression codec whose package is missing is CodecUnavailableError: not a DecodeError (the
data is not known to be bad), so a reader that skips corrupt batches does not drop every snappy,
lz4 or zstd batch; raised on both implementations, decoding and encoding."""

from __future__ import annotations

import pickle

import pytest

import kproto
from kproto import compression
from kproto.errors import CodecUnavailableError, CorruptRecordError, DecodeError
from tests import spark_captures as sc

pytest.importorskip("cramjam")  # the batches are written with it first


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_reading_a_batch_without_its_codec(impl, codec, monkeypatch):
    data = sc.records(3, codec)
    R = impl.load("records")
    monkeypatch.setattr(compression, "_cramjam", None)
    with pytest.raises(CodecUnavailableError) as info:
        R.Records(data).records()
    error = info.value
    assert not isinstance(error, DecodeError) and not isinstance(error, CorruptRecordError)
    assert isinstance(error, kproto.KprotoError) and isinstance(error, ImportError)
    assert (error.codec, error.package, error.name) == (codec, "cramjam", "cramjam")
    assert "pip install 'kproto[compression]'" in str(error) and "pip install '.[compression]'" in str(error)
    with pytest.raises(CodecUnavailableError):
        R.Records(data).to_arrow()


@pytest.mark.parametrize("codec", ["snappy", "lz4", "zstd"])
def test_writing_without_the_codec(codec, monkeypatch):
    monkeypatch.setattr(compression, "_cramjam", None)
    with pytest.raises(CodecUnavailableError, match=f"^{codec} needs the cramjam package"):
        compression.compress(codec, b"abc")
    with pytest.raises(CodecUnavailableError):
        sc.records(2, codec)
    assert compression.compress("gzip", b"abc")  # gzip is the standard library's


def test_pickles():
    error = CodecUnavailableError("zstd")
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is CodecUnavailableError and str(again) == str(error) and again.codec == "zstd"
