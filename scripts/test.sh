#!/usr/bin/env bash
# Run the test suite twice: on the Cython extension, then on the pure-Python twin.
# Extra arguments go to pytest (e.g. scripts/test.sh -k headers).
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONHASHSEED=0
status=0
echo "== tests on the Cython extension"
.venv/bin/python -m pytest -q -m "not slow and not kafka" "$@" tests || status=$?
echo "== tests on the pure-Python implementation (KPROTO_NO_EXTENSIONS=1)"
KPROTO_NO_EXTENSIONS=1 .venv/bin/python -m pytest -q -m "not slow and not kafka" "$@" tests || status=$?
exit $status
