#!/usr/bin/env bash
# Set up a development environment from a fresh clone; safe to run again.
#
#   scripts/setup.sh            virtualenv in .venv, build + test dependencies, the extension
#   scripts/setup.sh --spark    also pyspark and a Java runtime (apt) for the Spark job
#   scripts/setup.sh --capture  also tcpdump / tshark (apt) for the live-capture test
#   scripts/setup.sh --portability  also zig, cibuildwheel and actionlint (PyPI) for the
#                               cross-compile and workflow checks (tests/test_portability.py)
#
# Environment: PYTHON (interpreter to create the venv with, default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

want_spark=0
want_capture=0
want_portability=0
for arg in "$@"; do
  case "$arg" in
    --spark) want_spark=1 ;;
    --capture) want_capture=1 ;;
    --portability) want_portability=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PYTHON"
  "$PYTHON" -m venv .venv
fi
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)

# Reinstall dependencies only when pyproject.toml changed since the last run.
stamp=.venv/.kproto-deps
extras="test"
[ "$want_spark" = 1 ] && extras="$extras,spark"
wanted="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
  echo "setup: installing build and test dependencies"
  "${PIP[@]}" install --upgrade pip setuptools wheel "Cython>=3.0.8" "numpy>=2.0"
  "${PIP[@]}" install --no-build-isolation -e ".[$extras]"
  echo "$wanted" > "$stamp"
fi

echo "setup: building the Cython extension"
.venv/bin/python setup.py -q build_ext --inplace 2>&1 | grep -Ev "^(warning|  )|Wmaybe-uninitialized|note:" || true
.venv/bin/python -c "import kproto, sys; sys.exit(0 if kproto.extension_loaded() else 'kproto extension failed to load')"

if [ "$want_capture" = 1 ] && [ -x scripts/install-capture-tools.sh ]; then
  scripts/install-capture-tools.sh || true
fi
if [ "$want_portability" = 1 ] && [ -x scripts/install-portability-tools.sh ]; then
  scripts/install-portability-tools.sh
fi
if [ "$want_spark" = 1 ] && [ -x scripts/install-java.sh ]; then
  scripts/install-java.sh
fi
echo "setup: ready (.venv)"
