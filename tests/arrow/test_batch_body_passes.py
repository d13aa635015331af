"""The compiled body passes (the JSON pass and the partition pass) read the header pass's
columns through one binding (``bind_frames``) and make their output columns from one table
(``PART_COLUMNS``): the columns they accept, and those they give, are checked here against
the pure twin."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from kproto import api
from kproto import messages as m
from kproto._py import batch as py_batch
from kproto.records import Record, RecordBatch

c_batch = pytest.importorskip("kproto._c._batch")
P = m.ProduceRequest


def prefixed(*payloads: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


def produce_frames() -> bytes:
    records = RecordBatch.encode([Record(value=b"v")] * 3, base_offset=0)
    body = P(
        acks=1,
        timeout_ms=100,
        topic_data=[
            P.TopicProduceData(
                name="orders",
                partition_data=[
                    P.PartitionProduceData(index=2, records=records),
                    P.PartitionProduceData(index=5, records=None),
                ],
            )
        ],
    )
    metadata = api.encode_request(m.MetadataRequest(topics=None), version=12, correlation_id=1, client_id="a")
    return prefixed(metadata, api.encode_request(body, version=9, correlation_id=2, client_id="p"))


@pytest.mark.parametrize(
    "data",
    [produce_frames(), prefixed(produce_frames()[4:60]), b""],
    ids=["two partitions", "no produce body", "empty"],
)
def test_partition_columns_have_the_twins_types_and_values(data):
    c = c_batch.partition_rows(data, c_batch.scan(data))
    py = py_batch.partition_rows(data, py_batch.scan(data))
    assert set(c) == set(py)
    for name, column in py.items():
        if isinstance(column, np.ndarray):
            assert c[name].dtype == column.dtype, name
            if name not in ("batch_count", "record_count", "codec", "producer_id", "producer_id_valid"):
                # (the twin leaves every record set to the records module: those come after)
                assert c[name].tolist() == column.tolist(), name
    for name in ("topic", "topic_id"):
        assert [part.tolist() if isinstance(part, np.ndarray) else part for part in c[name]] == [
            part.tolist() if isinstance(part, np.ndarray) else part for part in py[name]
        ]


def test_body_passes_take_the_header_columns_as_the_header_pass_makes_them():
    data = produce_frames()
    expected_offsets, expected_text = c_batch.json_bodies(data, c_batch.scan(data))
    expected_rows = c_batch.partition_rows(data, c_batch.scan(data))["partition"].tolist()
    assert expected_rows == [2, 5]

    wrong_type = c_batch.scan(data)
    wrong_type["status"] = wrong_type["status"].astype(np.int32)
    missing = c_batch.scan(data)
    del missing["body_offset"]
    short = c_batch.scan(data)
    short["size"] = short["size"][:1]
    for cols, error in ((wrong_type, ValueError), (missing, KeyError), (short, ValueError)):
        with pytest.raises(error):
            c_batch.json_bodies(data, cols)
        with pytest.raises(error):
            c_batch.partition_rows(data, cols)

    # The JSON pass writes the status of a body that fails; the partition pass only reads.
    read_only = c_batch.scan(data)
    read_only["status"].flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        c_batch.json_bodies(data, read_only)
    assert c_batch.partition_rows(data, read_only)["partition"].tolist() == expected_rows
    offsets, text = c_batch.json_bodies(data, c_batch.scan(data))
    assert offsets.tolist() == expected_offsets.tolist() and text == expected_text
