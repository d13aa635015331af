#!/usr/bin/env bash
# Memory-safety checks of the compiled extension (see docs/hardening.md).
#
#   scripts/sanitize.sh asan [FUZZ_SECONDS]   AddressSanitizer + UndefinedBehaviorSanitizer: builds a
#                                             sanitized copy of the tree in $KPROTO_ASAN_DIR
#                                             (default /tmp/kproto-asan) from the last commit
#                                             (KPROTO_ASAN_SOURCE=worktree: the working tree), then
#                                             runs the test suite and every fuzz target for
#                                             FUZZ_SECONDS (default 30) each in it.
#   scripts/sanitize.sh valgrind [RUNS]       valgrind memcheck on the normal in-place build: the core
#                                             tests, then RUNS (default 3000) fuzz inputs per target;
#                                             fails on any memcheck error or definite leak whose
#                                             stack passes through kproto's compiled modules.
#
# The sanitized build never touches the working tree's own build (colleagues keep theirs).
# Exit status is non-zero on any test failure, fuzz failure or sanitizer report.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY="$ROOT/.venv/bin/python"
mode=${1:-asan}

# Core tests: primitives, headers, framing, the message codec and the records reader.
CORE_TESTS=(tests/codec/test_primitives.py tests/codec/test_headers.py tests/codec/test_framing.py tests/codec/test_api.py
            tests/codec/test_records.py tests/arrow/test_capture.py)

case "$mode" in
asan)
    fuzz_seconds=${2:-30}
    dest=${KPROTO_ASAN_DIR:-/tmp/kproto-asan}
    rm -rf "$dest"
    mkdir -p "$dest"
    if [ "${KPROTO_ASAN_SOURCE:-head}" = worktree ]; then
        echo "== copying the working tree to $dest"
        tar -C "$ROOT" --exclude=./.venv --exclude=./.git --exclude=./build --exclude='*.so' \
            --exclude='./kproto/_c/_*.c' --exclude='*/__pycache__' -cf - . | tar -C "$dest" -xf -
    else
        # the last commit: a consistent tree even while work is in progress in the checkout
        echo "== exporting $(git -C "$ROOT" rev-parse --short HEAD) to $dest"
        git -C "$ROOT" archive HEAD | tar -C "$dest" -xf -
    fi
    cd "$dest"
    echo "== building with KPROTO_SANITIZE=1 (ASan + UBSan)"
    KPROTO_SANITIZE=1 nice -n 19 "$PY" setup.py build_ext --inplace > build.log 2>&1 \
        || { tail -40 build.log; exit 1; }
    # The interpreter is not sanitized, so the runtime must be loaded first. Leak checking is
    # off here (CPython does not free everything at exit); valgrind mode checks leaks.
    # PYTHONMALLOC=malloc sends Python's own allocations through ASan too, so a Cython
    # overrun of a Python object's memory is caught.
    export LD_PRELOAD
    LD_PRELOAD="$(gcc -print-file-name=libasan.so)"
    export ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
    export PYTHONMALLOC=malloc PYTHONHASHSEED=0
    "$PY" - <<'EOF'
import kproto, kproto._c._codec as c
assert kproto.extension_loaded(), "the sanitized extension did not load"
print("== sanitized extension:", c.__file__)
EOF
    status=0
    echo "== test suite under ASan + UBSan (without tests/analyze/test_spark.py)"
    # The Spark tests start a JVM, which inherits LD_PRELOAD and hangs with the ASan runtime
    # in it; the Python side of those jobs (kproto.analyze.spark.worker) is tested without Spark
    # in tests/analyze/test_spark_worker.py, which runs here.
    nice -n 19 "$PY" -m pytest -q -m "not slow" -p no:cacheprovider --ignore=tests/analyze/test_spark.py tests \
        || status=$?
    echo "== fuzz targets under ASan + UBSan, ${fuzz_seconds} s each"
    # --slow 5: the sanitizers make every input a few times slower; hangs still stand out
    nice -n 19 "$PY" -m tests.fuzz.run all --seconds "$fuzz_seconds" --slow 5 --crash-dir /tmp/kproto-asan-crashes \
        || status=$?
    exit $status
    ;;
valgrind)
    runs=${2:-3000}
    command -v valgrind > /dev/null || { echo "valgrind is not installed (apt-get install valgrind)"; exit 2; }
    cd "$ROOT"
    "$PY" -c "import kproto, sys; sys.exit(0 if kproto.extension_loaded() else 'build the extension first')"
    export PYTHONMALLOC=malloc PYTHONHASHSEED=0
    # CPython itself trips memcheck where there is no bug; memcheck_report counts only the
    # errors and definite leaks with a frame of kproto's compiled modules on their stack.
    memcheck=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite --num-callers=40)
    status=0
    echo "== core tests under valgrind memcheck"
    nice -n 19 "${memcheck[@]}" --log-file=/tmp/kproto-valgrind-tests.log \
        "$PY" -m pytest -q -m "not slow" -p no:cacheprovider "${CORE_TESTS[@]}" || status=$?
    "$PY" -m tests.fuzz.memcheck_report /tmp/kproto-valgrind-tests.log || status=1
    echo "== ${runs} fuzz inputs per target under valgrind memcheck (compiled decoders only)"
    nice -n 19 "${memcheck[@]}" --log-file=/tmp/kproto-valgrind-fuzz.log \
        "$PY" -m tests.fuzz.run all --only c --runs "$runs" --slow 60 || status=$?
    "$PY" -m tests.fuzz.memcheck_report /tmp/kproto-valgrind-fuzz.log || status=1
    echo "(full logs: /tmp/kproto-valgrind-tests.log, /tmp/kproto-valgrind-fuzz.log)"
    exit $status
    ;;
*)
    echo "usage: scripts/sanitize.sh asan [FUZZ_SECONDS] | valgrind [RUNS]" >&2
    exit 2
    ;;
esac
