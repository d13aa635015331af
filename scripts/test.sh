#!/usr/bin/env bash
# Run the test suite on the Cython extension (tests taking the `impl` fixture run there on
# both implementations), then again on the pure-Python twin the test modules marked `twin`:
# those whose result the active implementation can change, chosen from their imports by
# tests/twin_selection.py (the tests of the Spark job and its report run once).
# Extra arguments go to pytest (e.g. scripts/test.sh -k headers).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
status=0
echo "== tests on the Cython extension"
.venv/bin/python -m pytest -q -m "not slow and not kafka" "$@" tests || status=$?
echo "== the twin-marked tests on the pure-Python implementation (KPROTO_NO_EXTENSIONS=1)"
KPROTO_NO_EXTENSIONS=1 .venv/bin/python -m pytest -q -m "twin and not slow and not kafka" "$@" tests || status=$?
exit $status
