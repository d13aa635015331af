"""What both implementations share: protocol constants, output shapes and cold Python helpers.

``kproto._c`` (compiled) and ``kproto._py`` (the pure twin) import from here and never
from each other; the public modules import from here too. Nothing in this package
imports either implementation.
"""
