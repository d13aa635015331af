"""Making the Spark JVM's class-data archive at set-up (kproto/analyze/spark/jvm_archive.py): one small analysis.

Above the Spark job (it runs :func:`kproto.analyze.spark.jobs.analyze`), where kproto/analyze/spark/jvm_archive.py
is below it (the job's session maps or records the archive), so imports go one way.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import kproto
from kproto import messages
from kproto.analyze.spark.jobs import analyze
from kproto.analyze.spark.jvm_archive import finish, plan
from kproto.analyze.spark.options import Options
from kproto.analyze.spark.session import spark_session


def prepare() -> int:
    """Make the archive now (``python -m kproto.analyze.spark.jvm_archive_prepare``; scripts/setup.sh --spark
    runs it): one local analysis of a few frames, recording. 0 when it is there after."""
    chosen = plan(record=True)
    if chosen.action != "record":
        print(f"kproto JVM archive: {chosen.action}{f' ({chosen.path})' if chosen.path else ''}")
        return 0 if chosen.action in ("use", "off") else 1
    with tempfile.TemporaryDirectory(prefix="kproto-jvm-archive-") as folder:
        frames = Path(folder) / "frames.bin"
        request = messages.MetadataRequest(topics=None)
        frames.write_bytes(
            b"".join(
                kproto.encode_request(request, version=12, correlation_id=n, client_id="warm-up", size_prefixed=True)
                for n in range(4)
            )
        )
        spark = spark_session("local[2]", input_bytes=0, record_jvm_archive=True)
        spark.sparkContext.setLogLevel("ERROR")
        analyze([str(frames)], str(Path(folder) / "out"), spark=spark, options=Options(), progress=False)
        made = finish(spark)
    print(f"kproto JVM archive: {'made' if made else 'NOT made'} ({chosen.path})")
    return 0 if made else 1


if __name__ == "__main__":
    raise SystemExit(prepare())
