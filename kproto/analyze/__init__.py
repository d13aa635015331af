"""kproto's analysis application: the ``kproto`` command, the Spark job and its report.

Built on the Arrow layer (``kproto.arrow``) and the codec (``kproto``):

* :mod:`kproto.analyze.cli`: the ``kproto`` command; a subcommand per ``cli_*`` module
  (``dump``, ``decode``, ``analyze``, ``versions``).
* :mod:`kproto.analyze.spark`: captures to tables and a report with Spark (``kproto analyze``).
* :mod:`kproto.analyze.dump`: frames as text, live (``kproto dump``).
* :mod:`kproto.analyze.fingerprint`: which client library sent a connection's requests
  (its table is built from :mod:`kproto.analyze.client_recordings`).

Importing this package imports nothing heavy: ``kproto decode`` and ``kproto versions`` run
without numpy, pyarrow or pyspark. See docs/architecture.md and docs/analyze.md.
"""
