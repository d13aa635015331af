"""Checks of the whole tree: layers, sizes, one place per rule, docs, packaging, portability."""
