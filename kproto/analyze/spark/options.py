"""The options of a run of ``kproto analyze`` (and of ``--follow``), whichever module reads them."""

from __future__ import annotations

from dataclasses import dataclass

from kproto.analyze.spark import planning as P


@dataclass
class Options:
    broker_ports: tuple[int, ...] = (9092,)
    kafka_ports: tuple[int, ...] = ()  # read as Kafka whatever they carry (--port)
    show_credentials: bool = False  # bodies keep SASL tokens and other credentials (kproto.arrow.credentials)
    split_bytes: int | None = None  # None: about one range per core, 32-256 MiB each
    overlap_bytes: int = P.DEFAULT_OVERLAP_BYTES
    body: str | None = "json"
    records: str = "summary"  # record sets in the JSON bodies: "summary" or "base64"
    fail_fast: bool = False  # an input that cannot be read completely fails the run
    report: bool = True
    driver_rows: int = 200_000  # compact rows combined in the driver up to this many, else by Spark
    driver_input_bytes: int = 64 << 20  # rows of connections come to the driver for inputs up to this size
    driver_report_frames: int = 250_000  # the report's facts computed in the driver (pyarrow) up to this many
    # frames, else by Spark queries
    capture_sets: bool = True  # consecutive files of one rotated capture read as one (capture_sets.py)
    named_sets: tuple[tuple[str, str], ...] = ()  # (name, glob): files read as one capture set, named so
