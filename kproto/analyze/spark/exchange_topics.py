"""The run's names for the topic IDs of the written ``exchanges`` table (docs/analyze.md, "Topic IDs").

A task names the topic ID of an exchange with the responses it decoded itself
(``kproto.arrow.exchanges``); the names the whole run gives are known only at its end, in the
compact ``topic_name`` rows. :func:`name_written_topics` then rewrites the part files that
hold an exchange the run names otherwise, by the rule of the topics table
(``kproto.arrow.exchanges.resolve_topic_ids``), so the table does not depend on how the run was
cut into tasks. Runs whose responses name no topic ID (no Metadata v10+ and the like) read
nothing back.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow import fs

from kproto.analyze.spark.worker import output_filesystem
from kproto.arrow import exchanges as E

#: Rows per row group of a rewritten part (the tasks' ParquetSink writes the same).
ROW_GROUP_ROWS = 256 * 1024


@dataclass(frozen=True)
class _CheckedPart:
    """What a part file held when it was last named: its identity, and the name then given to each ID in it."""

    identity: tuple[int, int]  # (size, mtime in ns): a part written again is read again
    names: dict[str, str | None]  # every topic ID of the part -> the run's name for it then


#: Part files already named, by path. ``kproto analyze --follow`` ends a run after every batch;
#: a part needs reading again only when it changed or a name for one of its IDs did, so a long
#: follow does not read every part it ever wrote at each batch.
_CHECKED: dict[str, _CheckedPart] = {}


def name_written_topics(out: str, compact_rows: pa.Table) -> int:
    """Name the topic IDs of ``<out>/exchanges`` with the run's ``topic_name`` compact rows;
    returns how many part files were rewritten (each under a hidden name, then renamed)."""
    names = compact_rows.filter(pc.equal(compact_rows["kind"], "topic_name")).select(["topic_id", "topic"])
    if not names.num_rows:
        return 0
    run_names = E.run_topic_names(names)
    filesystem, base = output_filesystem(out)
    rewritten = 0
    for info in filesystem.get_file_info(fs.FileSelector(f"{base}/exchanges")):
        if not (info.base_name.startswith("part-") and info.base_name.endswith(".parquet")):
            continue
        checked = _CHECKED.get(info.path)
        if (
            checked is not None
            and checked.identity == _identity(info)
            and all(run_names.get(topic_id) == name for topic_id, name in checked.names.items())
        ):
            continue
        columns = pq.read_table(info.path, columns=["topic", "topic_id"], filesystem=filesystem)
        ids = [i for i in pc.unique(columns["topic_id"]).to_pylist() if i is not None]
        if ids:
            topic = columns["topic"].combine_chunks()
            named = E.name_topics(topic, columns["topic_id"].combine_chunks(), run_names)
            if not named.equals(topic):
                table = pq.read_table(info.path, filesystem=filesystem)
                table = table.set_column(table.schema.get_field_index("topic"), table.schema.field("topic"), named)
                hidden = f"{base}/exchanges/.{info.base_name}.tmp"
                pq.write_table(table, hidden, filesystem=filesystem, row_group_size=ROW_GROUP_ROWS)
                filesystem.move(hidden, info.path)
                rewritten += 1
                info = filesystem.get_file_info(info.path)
        if _identity(info) is not None:
            _CHECKED[info.path] = _CheckedPart(_identity(info), {i: run_names.get(i) for i in ids})
    return rewritten


def _identity(info: fs.FileInfo) -> tuple[int, int] | None:
    """(size, mtime in ns) of a file, or None where the filesystem gives no modification time."""
    return None if info.mtime_ns is None else (info.size, info.mtime_ns)
