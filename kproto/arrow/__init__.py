"""kproto's Arrow layer: Kafka frames and captured traffic as Arrow tables (needs numpy and pyarrow).

Built on the codec (``kproto``), used by the analysis application (``kproto.analyze``):

* :mod:`kproto.arrow.capture`: pcap / pcapng / frame dumps to frames, with TCP reassembly,
  stream resynchronisation and the accounting of every packet and byte.
* :mod:`kproto.arrow.frames`: frames to header columns (and bodies as JSON or typed structs),
  in C loops that release the GIL; per-partition views. The tables it builds have their own
  modules: :mod:`kproto.arrow.structs` (typed struct columns), :mod:`kproto.arrow.partitions`
  (one row per topic-partition).
* :mod:`kproto.arrow.topic_names`: the topic IDs responses name, with the names they give.
* :mod:`kproto.arrow.exchanges`: requests paired with their responses, across batches. The frames'
  heads and column helpers it builds on (no pairing rule) are :mod:`kproto.arrow.exchange_heads`.
* :mod:`kproto.arrow.credentials`: SASL credentials redacted from frames.

Importing this package imports nothing heavy; each module imports numpy and pyarrow itself.
See docs/architecture.md for the layers and docs/batch.md, docs/capture.md for the modules.
"""
