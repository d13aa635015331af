"""The analysis application's tests: the CLI, dump, fingerprints, the Spark job and report (kproto.analyze)."""
