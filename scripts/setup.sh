#!/usr/bin/env bash
# Set up a development environment from a fresh clone; safe to run again.
#
#   scripts/setup.sh            virtualenv in .venv, build + test dependencies, the extension
#   scripts/setup.sh --spark    also pyspark and a Java runtime (apt) for the Spark job
#   scripts/setup.sh --capture  also tcpdump / tshark (apt) for the live-capture test
#   scripts/setup.sh --browser  also a headless Chromium (apt) for the report's browser tests
#   scripts/setup.sh --portability  also zig, cibuildwheel and actionlint (PyPI) for the
#                               cross-compile and workflow checks (tests/project/test_portability.py)
#   scripts/setup.sh --kafka-clients  also the kafka-clients jar of every Kafka release the
#                               schema tables are made from (scripts/install-kafka.sh
#                               --clients-only; needs mvn and Java): tools/gen_schema.py
#                               --check reads their definitions (tests/codec/test_schema.py)
#
# Environment: PYTHON (interpreter to create the venv with, default python3).
set -euo pipefail
cd "$(dirname "$0")/.."

want_spark=0
want_capture=0
want_browser=0
want_portability=0
want_kafka_clients=0
for arg in "$@"; do
  case "$arg" in
    --spark) want_spark=1 ;;
    --capture) want_capture=1 ;;
    --browser) want_browser=1 ;;
    --portability) want_portability=1 ;;
    --kafka-clients) want_kafka_clients=1 ;;
    *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
  esac
done

PYTHON=${PYTHON:-python3}
setup_started=$SECONDS
log=.venv/setup.log

# step NAME COMMAND...: run quietly, its output in $log but for its progress lines (setup.py's
# "kproto build: ..." per compiled module); say how long it took, or show the log's end and
# stop when it fails.
step() {
  local name=$1 started=$SECONDS
  shift
  echo "setup: $name ..."
  echo "== $name: $*" >>"$log"
  if ! "$@" 2>&1 | tee -a "$log" | while IFS= read -r line; do
      case "$line" in "kproto build: "*) echo "setup:   ${line#kproto build: }" ;; esac
    done; then
    echo "setup: $name FAILED after $((SECONDS - started)) s; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
  fi
  echo "setup: $name done ($((SECONDS - started)) s)"
}

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $PYTHON (the first run also installs the dependencies and"
  echo "       compiles the extension: a few minutes; later runs only do what changed)"
  "$PYTHON" -m venv .venv
fi
: >"$log"
PIP=(.venv/bin/python -m pip --disable-pip-version-check)

# The stamp holds pyproject.toml's hash and the extras installed with it. A changed
# pyproject reinstalls the package with every extra recorded plus the ones asked for; an
# unchanged one installs only the requirements of extras not installed yet.
stamp=.venv/.kproto-deps
wanted_extras="test docs"   # docs: mkdocs for the site build test (tests/project/test_docs_site.py)
[ "$want_spark" = 1 ] && wanted_extras="$wanted_extras spark"
pyproject_hash=$(sha256sum pyproject.toml | cut -d' ' -f1)
installed_hash=""
installed_extras=""
if [ -f "$stamp" ]; then
  installed_hash=$(sed -n 1p "$stamp")
  installed_extras=$(sed -n 2p "$stamp")
fi
new_extras=""
for extra in $wanted_extras; do
  case " $installed_extras " in *" $extra "*) ;; *) new_extras="$new_extras $extra" ;; esac
done
all_extras=$(echo $installed_extras $new_extras)
if [ "$installed_hash" != "$pyproject_hash" ]; then
  step "installing build tools" "${PIP[@]}" install --upgrade pip "setuptools>=77" wheel "Cython>=3.0.8" "numpy>=2.0"
  step "installing kproto and its extras (${all_extras// /, })" \
    env KPROTO_NO_EXTENSIONS=1 "${PIP[@]}" install --no-build-isolation -e ".[${all_extras// /,}]"
  printf '%s\n%s\n' "$pyproject_hash" "$all_extras" >"$stamp"
elif [ -n "$new_extras" ]; then
  requirement_lines=$(.venv/bin/python scripts/extra_requirements.py $new_extras)
  mapfile -t requirements <<<"$requirement_lines"
  step "installing the new extras ($(echo $new_extras | sed 's/ /, /g'))" "${PIP[@]}" install "${requirements[@]}"
  printf '%s\n%s\n' "$pyproject_hash" "$all_extras" >"$stamp"
fi

# The editable install above compiles nothing (KPROTO_NO_EXTENSIONS=1): the extension is
# built once, here, in place. The compiler's output goes to the log: warnings from Cython-generated C are not ours to
# read on every run, and a failure shows the log's end.
step "building the Cython extension" .venv/bin/python setup.py build_ext --inplace
.venv/bin/python -c "import kproto, sys; sys.exit(0 if kproto.extension_loaded() else 'kproto extension failed to load')"

if [ "$want_capture" = 1 ] && [ -x scripts/install-capture-tools.sh ]; then
  scripts/install-capture-tools.sh || true
fi
if [ "$want_browser" = 1 ] && [ -x scripts/install-browser.sh ]; then
  scripts/install-browser.sh || true
fi
if [ "$want_portability" = 1 ] && [ -x scripts/install-portability-tools.sh ]; then
  scripts/install-portability-tools.sh
fi
if [ "$want_spark" = 1 ] && [ -x scripts/install-java.sh ]; then
  scripts/install-java.sh
  # Once per Java and Spark: the JVM's class-data archive, so every local analysis starts
  # in about half the time (kproto/analyze/spark/jvm_archive.py; KPROTO_JVM_ARCHIVE=off skips it).
  step "recording the Spark JVM's classes for fast starts" .venv/bin/python -m kproto.analyze.spark.jvm_archive_prepare
fi
if [ "$want_kafka_clients" = 1 ]; then
  # No "|| true": without the jars the schema check cannot run, and must not pass.
  scripts/install-kafka.sh --clients-only
fi
echo "setup: ready (.venv, $((SECONDS - setup_started)) s; log: $log)"
