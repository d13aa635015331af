"""Record batch decoding speed against aiokafka's Cython reader and kafka-python, in one run.

The batch: one uncompressed magic 2 batch of 1,000 records (16-byte keys,
1,024-byte values, no headers), about 1 MiB, written by aiokafka's builder.
Every reader checks the CRC-32C, as a consumer does by default
(``check_crcs=True`` in both aiokafka and kafka-python); aiokafka is also
measured without the check, as a floor.

* objects: every record as a Python object with bytes key and value
  (kproto ``Records(...)`` -> ``batch.records()``; aiokafka / kafka-python
  ``DefaultRecordBatch`` iteration).
* columnar: kproto ``Records(...).to_arrow()`` (a pyarrow.Table with offset,
  timestamp, key, value, headers and batch columns; no Python object per record).

Run:  .venv/bin/python -m pytest benchmarks/bench_records.py --benchmark-only
      .venv/bin/python benchmarks/bench_records.py          (a table with ratios)
"""

from __future__ import annotations

import os
import sys
import time

import pytest

from kproto import _impl

RECORDS = 1000
VALUE_SIZE = 1024


def make_batch() -> bytes:
    from aiokafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    random = os.urandom(VALUE_SIZE * RECORDS)
    for i in range(RECORDS):
        builder.append(
            i,
            timestamp=1_700_000_000_000 + i,
            key=b"key-%012d" % i,
            value=random[i * VALUE_SIZE : (i + 1) * VALUE_SIZE],
            headers=[],
        )
    return bytes(builder.build())


BATCH = make_batch()
records_c = _impl.load("records", "c") if "c" in _impl.available() else None
records_py = _impl.load("records", "py")


def kproto_objects(module=records_c):
    return [record for batch in module.Records(BATCH) for record in batch.records()]


def kproto_columnar(module=records_c):
    return module.Records(BATCH).to_arrow()


def kproto_columnar_views(module=records_c):
    """The issue's columns (offset, timestamp, key, value, header count, headers), with key and
    value as Arrow binary_view pointing into the batch: no copy of the 1 MiB of values."""
    return module.Records(BATCH).to_arrow(batch_columns=False, zero_copy=True)


def aiokafka_objects(check_crc=True):
    from aiokafka.record._crecords import DefaultRecordBatch

    batch = DefaultRecordBatch(BATCH)
    if check_crc and not batch.validate_crc():
        raise ValueError("crc")
    return list(batch)


def aiokafka_objects_no_crc():
    return aiokafka_objects(check_crc=False)


def kafka_python_objects():
    from kafka.record.default_records import DefaultRecordBatch

    batch = DefaultRecordBatch(BATCH)
    if not batch.validate_crc():
        raise ValueError("crc")
    return list(batch)


def _check_same_records():
    ours = kproto_objects()
    theirs = aiokafka_objects()
    assert len(ours) == len(theirs) == RECORDS
    assert all(a.value == b.value and a.key == b.key and a.offset == b.offset for a, b in zip(ours, theirs))


needs_extension = pytest.mark.skipif(records_c is None, reason="extension not built")


@needs_extension
@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_kproto_objects(benchmark):
    _check_same_records()
    assert len(benchmark(kproto_objects)) == RECORDS


@needs_extension
@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_kproto_columnar(benchmark):
    assert benchmark(kproto_columnar).num_rows == RECORDS


def test_kproto_columnar_views(benchmark):
    assert benchmark(kproto_columnar_views).num_rows == RECORDS


@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_kproto_pure_python_objects(benchmark):
    assert len(benchmark(kproto_objects, records_py)) == RECORDS


@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_aiokafka_cython_objects(benchmark):
    assert len(benchmark(aiokafka_objects)) == RECORDS


@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_aiokafka_cython_objects_no_crc(benchmark):
    assert len(benchmark(aiokafka_objects_no_crc)) == RECORDS


@pytest.mark.benchmark(group="decode 1 MiB v2 batch")
def test_kafka_python_objects(benchmark):
    assert len(benchmark(kafka_python_objects)) == RECORDS


def _best_of(function, repeat: int, rounds: int = 7) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(repeat):
            function()
        best = min(best, (time.perf_counter() - start) / repeat)
    return best


def main() -> None:
    if records_c is None:
        sys.exit("build the extension first: python setup.py build_ext --inplace")
    _check_same_records()
    print(f"batch: {len(BATCH)} bytes, {RECORDS} records, uncompressed, CRC-32C checked by every reader\n")
    rows = [
        ("kproto objects", kproto_objects, 200),
        ("kproto columnar (Arrow)", kproto_columnar, 200),
        ("kproto columnar (Arrow, zero-copy views)", kproto_columnar_views, 200),
        ("aiokafka Cython objects", aiokafka_objects, 100),
        ("aiokafka Cython objects, no CRC check", aiokafka_objects_no_crc, 100),
        ("kafka-python objects", kafka_python_objects, 10),
        ("kproto pure-Python twin objects", lambda: kproto_objects(records_py), 10),
    ]
    times = {name: _best_of(function, repeat) for name, function, repeat in rows}
    for name, seconds in times.items():
        print(f"{name:40s} {seconds * 1e6:10.1f} us   {len(BATCH) / seconds / 1e9:6.2f} GB/s")
    aio = times["aiokafka Cython objects"]
    print()
    print(f"objects  vs aiokafka:              {aio / times['kproto objects']:5.1f}x  (target >= 3x)")
    print(
        f"objects  vs kafka-python:          {times['kafka-python objects'] / times['kproto objects']:5.1f}x"
        "  (target >= 20x)"
    )
    print(f"columnar vs aiokafka:              {aio / times['kproto columnar (Arrow)']:5.1f}x  (target >= 10x)")
    print(
        f"columnar, zero-copy vs aiokafka:   "
        f"{aio / times['kproto columnar (Arrow, zero-copy views)']:5.1f}x  (target >= 10x)"
    )
    print(
        f"objects  vs aiokafka without CRC:  "
        f"{times['aiokafka Cython objects, no CRC check'] / times['kproto objects']:5.1f}x"
    )


if __name__ == "__main__":
    main()
