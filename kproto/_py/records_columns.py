"""Pure-Python twin of kproto/_c/_records_columns.pxi: records as Arrow columns.

The compiled reader walks the records once into spans and builds the Arrow buffers
from them; this twin decodes Record objects and gives pyarrow lists of their fields,
to the same schema (and, with ``zero_copy``, the same binary_view type, copied).
"""

from __future__ import annotations

from kproto._common.records import BATCH_COLUMNS, arrow_type, batch_values, record_schema


def _columnar(batches, batch_columns: bool, zero_copy: bool = False):
    import pyarrow as pa

    columns: dict[str, list] = {name: [] for name in ("offset", "timestamp", "key", "value", "header_count", "headers")}
    batch_rows: dict[str, list] = {name: [] for name, _ in BATCH_COLUMNS}
    for batch in batches:
        records = batch.records()
        for record in records:
            columns["offset"].append(record.offset)
            columns["timestamp"].append(record.timestamp)
            columns["key"].append(record.key)
            columns["value"].append(record.value)
            columns["header_count"].append(len(record.headers))
            columns["headers"].append([{"key": k, "value": v} for k, v in record.headers])
        if batch_columns:
            for (name, _), value in zip(BATCH_COLUMNS, batch_values(batch)):
                batch_rows[name].extend([value] * len(records))
    schema = record_schema(batch_columns)
    if zero_copy:
        schema = schema.set(2, pa.field("key", pa.binary_view())).set(3, pa.field("value", pa.binary_view()))
    arrays = [
        pa.array(columns[name], type=schema.field(name).type)
        for name in ("offset", "timestamp", "key", "value", "header_count", "headers")
    ]
    if batch_columns:
        arrays += [pa.array(batch_rows[name], type=arrow_type(kind)) for name, kind in BATCH_COLUMNS]
    return pa.Table.from_arrays(arrays, schema=schema)
