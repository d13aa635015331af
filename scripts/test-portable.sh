#!/usr/bin/env bash
# The forced-fallback build: kproto compiled with KPROTO_PORTABLE=1 (KP_FORCE_PORTABLE),
# so every platform-specific C path (mmap/mremap column memory, __int128, SSE2,
# SSE4.2/AVX-512/PCLMUL CRC, byte-swap builtins, always_inline) takes the plain-C
# fallback that macOS, Windows or another compiler would take; then the whole test
# suite on that build. The build happens in a temporary copy of the tree, so the
# normal in-place build is untouched.
#
#   scripts/test-portable.sh [pytest args]
#
# Environment: KPROTO_PORTABLE_DIR  build there and keep it (e.g. to benchmark it:
#              cd "$KPROTO_PORTABLE_DIR/kproto" && PYTHONPATH=. ../../.venv/bin/python benchmarks/bench_batch.py)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
py=$repo/.venv/bin/python
[ -x "$py" ] || { echo "test-portable: run scripts/setup.sh first" >&2; exit 2; }

if [ -n "${KPROTO_PORTABLE_DIR:-}" ]; then
  work=$KPROTO_PORTABLE_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/kproto-portable.XXXXXX")
  trap 'rm -rf "$work"' EXIT
fi
src=$work/kproto
rm -rf "$src" && mkdir -p "$src"
# What a commit of this tree would hold (tracked files plus new ones git would track).
git ls-files -z --cached --others --exclude-standard | tar --null --ignore-failed-read -T - -cf - 2>/dev/null \
  | tar -xf - -C "$src"
# tests read ../shared/ (the Kafka reference data) beside the checkout
if [ -d "$repo/../shared" ]; then ln -sfn "$(cd "$repo/../shared" && pwd)" "$work/shared"; fi

echo "== building with KPROTO_PORTABLE=1 in $src"
started=$SECONDS
(cd "$src" && KPROTO_PORTABLE=1 nice -n 19 "$py" setup.py -q build_ext --inplace --parallel 2 > "$work/build.log" 2>&1) \
  || { tail -40 "$work/build.log"; echo "test-portable: build failed" >&2; exit 1; }
echo "built in $((SECONDS - started))s"

# The build must really be the portable one: no Linux-only or x86-only symbol left.
echo "== checking the modules use no platform-specific symbol"
status=0
for so in "$src"/kproto/_c/*.so; do
  found=$(nm "$so" 2>/dev/null | awk '{print $NF}' | grep -E '^(mmap|mmap64|mremap|munmap|madvise|__cpu_model|__cpu_indicator_init|__cpu_features2)(@.*)?$' || true)
  if [ -n "$found" ]; then
    echo "  $(basename "$so"): $(echo $found)"; status=1
  fi
done
[ "$status" = 0 ] || { echo "test-portable: the forced-fallback build still uses platform symbols" >&2; exit 1; }
echo "  none of mmap, mremap, munmap, madvise, __cpu_model in $(ls "$src"/kproto/_c/*.so | wc -l) modules"

cd "$src"
export PYTHONPATH=$src PYTHONHASHSEED=0
"$py" - <<'PY'
import os, sys
import kproto
from kproto._c import _batch
if not kproto.extension_loaded():
    sys.exit("test-portable: the compiled extension did not load")
src = os.environ["PYTHONPATH"]
if not os.path.realpath(_batch.__file__).startswith(os.path.realpath(src)):
    sys.exit(f"test-portable: imported {_batch.__file__}, not the portable build in {src}")
print("== portable build loaded from", os.path.dirname(_batch.__file__))
PY
echo "== tests on the forced-fallback (KPROTO_PORTABLE=1) build"
nice -n 19 "$py" -m pytest -q -m "not slow and not kafka" -p no:cacheprovider "$@" tests
