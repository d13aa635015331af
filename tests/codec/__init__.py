"""The codec's tests: messages, headers, primitives, framing, records, versions (kproto)."""
