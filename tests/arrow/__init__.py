"""The Arrow layer's tests: capture reading, frame decoding, exchanges (kproto.arrow)."""
