#!/usr/bin/env bash
# Installs the Kafka client libraries tools/record_clients.py drives against real brokers (issue 37),
# into a cache outside the tree, and builds the project's small drivers (tools/clients/) against them.
#
#   scripts/install-clients.sh                 every ecosystem below
#   scripts/install-clients.sh java go         just these (java streams share python go node kcat)
#   scripts/install-clients.sh --print-dir     the cache directory, then exit
#   scripts/install-clients.sh --held-out [...]  the held-out releases (HELDOUT_*), into clients/heldout/
#                                              (the evaluation set: releases the fingerprint table never saw)
#
# Layout, under ${KPROTO_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kproto}/clients/:
#   java/<v>/lib (kafka-clients and its runtime dependencies, slf4j-simple), java/<v>/classes (ClientDriver)
#   streams/<v>/lib (kafka-streams and its dependencies), streams/<v>/classes (StreamsDriver, ClientDriver)
#   share/<v>/lib (kafka-clients), share/<v>/classes (ShareDriver, ClientDriver): a share consumer (KIP-932)
#   python/<library>-<v>/      a virtual environment (bin/python)
#   go/<library>-<v>/driver    tools/clients/go/<library>/main.go built against that module release
#   node/kafkajs-<v>/node_modules
#   kcat/                      a marker: kcat comes from Debian (apt-get), on PATH
# Each client directory gets .ok when ready, or .failed holding the reason; the recorder drives
# the .ok ones and lists the .failed ones with their reason. Done ones are skipped (idempotent);
# remove a .failed file to try that one again. Exits non-zero when anything failed.
set -uo pipefail

# The releases, one place: the recorder takes whatever this script installed.
JAVA_RELEASES=(0.11.0.3 1.1.1 2.0.1 2.8.2 3.0.2 3.5.2 3.9.2 4.0.2 4.4.0)
KAFKA_PYTHON_RELEASES=(1.4.7 2.0.2 3.0.12)
AIOKAFKA_RELEASES=(0.8.1 0.11.0 0.14.0)
CONFLUENT_KAFKA_RELEASES=(1.9.2 2.2.0 2.6.1 2.16.1)
FRANZ_GO_RELEASES=(v1.11.0 v1.22.3)
IBM_SARAMA_RELEASES=(v1.43.3 v1.61.1)
SHOPIFY_SARAMA_RELEASES=(v1.27.2)
KAFKA_GO_RELEASES=(v0.2.5 v0.4.30 v0.4.51)
KAFKAJS_RELEASES=(1.16.0 2.2.4)
STREAMS_RELEASES=()                    # Kafka Streams applications: in the held-out set only, so far
SHARE_RELEASES=(4.4.0)                 # share consumers (KafkaShareConsumer, 4.1+; brokers serve share groups from 4.2)
SLF4J_SIMPLE=1.7.36
# The held-out evaluation set (tools/record_clients.py --held-out): other releases of the same libraries,
# none of them above, installed apart (clients/heldout/) so the table's recording never takes them.
HELDOUT_JAVA_RELEASES=(2.4.1 3.3.2 4.1.2)
HELDOUT_KAFKA_PYTHON_RELEASES=(1.4.6 2.2.15)
HELDOUT_AIOKAFKA_RELEASES=(0.10.0 0.12.0)
HELDOUT_CONFLUENT_KAFKA_RELEASES=(2.3.0 2.11.1)
HELDOUT_FRANZ_GO_RELEASES=(v1.15.4 v1.18.1)
HELDOUT_IBM_SARAMA_RELEASES=(v1.45.0)
HELDOUT_SHOPIFY_SARAMA_RELEASES=(v1.38.1)
HELDOUT_KAFKA_GO_RELEASES=(v0.4.40 v0.4.47)
HELDOUT_KAFKAJS_RELEASES=(1.15.0 2.1.0)
HELDOUT_STREAMS_RELEASES=(4.1.2)
HELDOUT_SHARE_RELEASES=()
# Dependencies a release needs at the version of its time (aiokafka 0.8 imports kafka-python 2.0's modules).
declare -A PYTHON_EXTRA=([aiokafka-0.8.1]="kafka-python==2.0.2")
# Releases with no wheel for this Python: the Python (pyenv) whose wheel they have.
declare -A PYTHON_OF=([confluent-kafka-1.9.2]=3.9)

ROOT=$(cd "$(dirname "$0")/.." && pwd)
say() { echo "install-clients: $*" >&2; }
cache_root=${KPROTO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kproto}
clients=$cache_root/clients
PYTHON=${KPROTO_PYTHON:-$ROOT/.venv/bin/python}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
status=0

# ready DIR: 0 when DIR is done (.ok) or known broken (.failed, reported again); 1 when it is to do.
ready() {
  if [ -f "$1/.ok" ]; then return 0; fi
  if [ -f "$1/.failed" ]; then say "$(basename "$1"): failed before: $(cat "$1/.failed")"; status=1; return 0; fi
  return 1
}
failed() {   # failed DIR REASON
  mkdir -p "$1"; echo "$2" >"$1/.failed"; say "$(basename "$1"): FAILED: $2"; status=1
}

# java_driver RELEASE: ClientDriver.java for that release. Before 2.0 the consumer has poll(long) and
# close(long, TimeUnit) only (4.0 removed those): the same steps, through the old calls.
java_driver() {
  case "$1" in
    0.*|1.*) sed -e 's/consumer.poll(Duration.ofMillis(200))/consumer.poll(200L)/' \
                 -e 's/consumer.close(Duration.ofSeconds(5))/consumer.close(5, TimeUnit.SECONDS)/' \
                 "$ROOT/tools/clients/java/ClientDriver.java" ;;
    *) cat "$ROOT/tools/clients/java/ClientDriver.java" ;;
  esac
}

# java_build DIR ARTIFACT RELEASE SOURCE...: DIR/lib (org.apache.kafka:ARTIFACT:RELEASE with its runtime
# jars and slf4j-simple, from Maven Central) and DIR/classes (the SOURCE files compiled against it);
# then DIR/.ok, or DIR/.failed with the reason.
java_build() {
  local dir=$1 artifact=$2 release=$3 work
  shift 3
  work=$(mktemp -d)
  rm -rf "$dir"; mkdir -p "$dir/classes"
  if ! "$ROOT/scripts/maven-fetch.sh" "$dir/lib" "org.apache.kafka:$artifact:$release" \
      "org.slf4j:slf4j-simple:$SLF4J_SIMPLE" 2>"$work/mvn.log"; then
    failed "$dir" "Maven Central: $(grep -m1 ERROR "$work/mvn.log")"
  elif ! javac -nowarn -d "$dir/classes" -cp "$dir/lib/*" "$@" >"$work/javac.log" 2>&1; then
    failed "$dir" "the driver does not compile against it: $(grep -m1 error "$work/javac.log")"
  else
    touch "$dir/.ok"
  fi
  rm -rf "$work"
}

java_clients() {
  command -v mvn >/dev/null && command -v javac >/dev/null || { say "mvn and javac are needed for the Java clients"; status=1; return; }
  local v dir source
  for v in "${JAVA_RELEASES[@]}"; do
    dir=$clients/java/$v
    ready "$dir" && continue
    say "kafka-clients $v ..."
    source=$(mktemp -d)
    java_driver "$v" >"$source/ClientDriver.java"
    java_build "$dir" kafka-clients "$v" "$source/ClientDriver.java"
    rm -rf "$source"
  done
}

# java_apps FOLDER ARTIFACT DRIVER RELEASE...: programs built on a Java artifact (Kafka Streams, a share
# consumer): DRIVER.java with ClientDriver.java (whose steps it reuses), against each release.
java_apps() {
  command -v javac >/dev/null || { say "javac is needed for $3"; status=1; return; }
  local folder=$1 artifact=$2 driver=$3 v dir
  shift 3
  for v in "$@"; do
    dir=$clients/$folder/$v
    ready "$dir" && continue
    say "$artifact $v ($driver) ..."
    java_build "$dir" "$artifact" "$v" "$ROOT/tools/clients/java/ClientDriver.java" \
      "$ROOT/tools/clients/java/$driver.java"
  done
}

python_one() {   # python_one LIBRARY RELEASE
  local dir=$clients/python/$1-$2 base=$PYTHON want=${PYTHON_OF[$1-$2]:-} pip
  ready "$dir" && return
  say "$1 $2 ..."
  if [ -n "$want" ]; then
    base=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$want".*/bin/python 2>/dev/null | sort -V | tail -n1)
    [ -n "$base" ] || { failed "$dir" "needs Python $want (pyenv), not found"; return; }
  fi
  rm -rf "$dir"
  "$base" -m venv "$dir" || { failed "$dir" "venv failed"; return; }
  # Wheels only but for kafka-python (pure Python): a C extension built here would link this machine's
  # librdkafka, not the release's own.
  local binary=(--only-binary ":all:"); [ "$1" = kafka-python ] && binary=()
  if ! "$dir/bin/python" -m pip install -q "${binary[@]}" "$1==$2" ${PYTHON_EXTRA[$1-$2]:-} >"$dir/pip.log" 2>&1; then
    failed "$dir" "pip: $(grep -m1 ERROR "$dir/pip.log")"; return
  fi
  local module=${1//-/_}; [ "$1" = kafka-python ] && module=kafka
  if ! "$dir/bin/python" -c "import $module" >"$dir/import.log" 2>&1; then
    failed "$dir" "does not import: $(tail -n1 "$dir/import.log")"; return
  fi
  touch "$dir/.ok"
}

python_clients() {
  local v
  for v in "${KAFKA_PYTHON_RELEASES[@]}"; do python_one kafka-python "$v"; done
  for v in "${AIOKAFKA_RELEASES[@]}"; do python_one aiokafka "$v"; done
  for v in "${CONFLUENT_KAFKA_RELEASES[@]}"; do python_one confluent-kafka "$v"; done
}

go_one() {   # go_one DRIVER MODULE RELEASE
  local driver=$1 module=$2 v=$3 path dir
  path=${module#github.com/}
  dir=$clients/go/${path//\//_}-$v   # e.g. go/IBM_sarama-v1.61.1
  ready "$dir" && return
  say "$module $v ..."
  rm -rf "$dir"; mkdir -p "$dir/src"
  sed "s#github.com/IBM/sarama#$module#" "$ROOT/tools/clients/go/$driver/main.go" >"$dir/src/main.go"
  (
    cd "$dir/src" || exit 1
    go mod init kproto.local/driver >/dev/null 2>&1 &&
    go get "$module@$v" >"$dir/go.log" 2>&1 &&
    go mod tidy >>"$dir/go.log" 2>&1 &&
    go build -o "$dir/driver" . >>"$dir/go.log" 2>&1
  ) || { failed "$dir" "go: $(grep -v '^go: downloading' "$dir/go.log" | head -n 3 | tr '\n' ' ')"; return; }
  touch "$dir/.ok"
}

go_clients() {
  command -v go >/dev/null || { say "go is needed for the Go clients"; status=1; return; }
  local v
  for v in "${FRANZ_GO_RELEASES[@]}"; do go_one franz github.com/twmb/franz-go "$v"; done
  for v in "${IBM_SARAMA_RELEASES[@]}"; do go_one sarama github.com/IBM/sarama "$v"; done
  for v in "${SHOPIFY_SARAMA_RELEASES[@]}"; do go_one sarama github.com/Shopify/sarama "$v"; done
  for v in "${KAFKA_GO_RELEASES[@]}"; do go_one kafkago github.com/segmentio/kafka-go "$v"; done
}

node_clients() {
  command -v npm >/dev/null || { say "npm is needed for kafkajs"; status=1; return; }
  local v dir
  for v in "${KAFKAJS_RELEASES[@]}"; do
    dir=$clients/node/kafkajs-$v
    ready "$dir" && continue
    say "kafkajs $v ..."
    rm -rf "$dir"; mkdir -p "$dir"
    if npm install --silent --no-audit --no-fund --prefix "$dir" "kafkajs@$v" >"$dir/npm.log" 2>&1; then
      touch "$dir/.ok"
    else
      failed "$dir" "npm: $(grep -m1 -i err "$dir/npm.log")"
    fi
  done
}

kcat_client() {
  local dir=$clients/kcat
  ready "$dir" && return
  if ! command -v kcat >/dev/null; then
    say "kcat (Debian) ..."
    apt-get install -y -q kcat >/dev/null 2>&1 || (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q kcat >/dev/null 2>&1)
  fi
  if command -v kcat >/dev/null; then
    # "1.7.1 librdkafka-2.0.2": the release the recorder names, and the librdkafka it links
    mkdir -p "$dir"; kcat -V 2>&1 | sed -n 's/^Version \([0-9.]*\) .*librdkafka \([0-9.]*\).*/\1 librdkafka-\2/p' >"$dir/.ok"
  else
    failed "$dir" "apt-get install kcat failed (Debian's package, needs root and apt)"
  fi
}

which=()
for arg in "$@"; do
  if [ "$arg" = --held-out ]; then
    clients=$clients/heldout
    JAVA_RELEASES=("${HELDOUT_JAVA_RELEASES[@]}"); KAFKA_PYTHON_RELEASES=("${HELDOUT_KAFKA_PYTHON_RELEASES[@]}")
    AIOKAFKA_RELEASES=("${HELDOUT_AIOKAFKA_RELEASES[@]}")
    CONFLUENT_KAFKA_RELEASES=("${HELDOUT_CONFLUENT_KAFKA_RELEASES[@]}")
    FRANZ_GO_RELEASES=("${HELDOUT_FRANZ_GO_RELEASES[@]}"); IBM_SARAMA_RELEASES=("${HELDOUT_IBM_SARAMA_RELEASES[@]}")
    SHOPIFY_SARAMA_RELEASES=("${HELDOUT_SHOPIFY_SARAMA_RELEASES[@]}"); KAFKA_GO_RELEASES=("${HELDOUT_KAFKA_GO_RELEASES[@]}")
    KAFKAJS_RELEASES=("${HELDOUT_KAFKAJS_RELEASES[@]}"); STREAMS_RELEASES=("${HELDOUT_STREAMS_RELEASES[@]}")
    SHARE_RELEASES=("${HELDOUT_SHARE_RELEASES[@]}")
  else
    which+=("$arg")
  fi
done
[ ${#which[@]} -eq 0 ] && which=(java streams share python go node kcat)
for part in "${which[@]}"; do
  case "$part" in
    --print-dir) echo "$clients"; exit 0 ;;
    java) java_clients ;;
    streams) java_apps streams kafka-streams StreamsDriver "${STREAMS_RELEASES[@]}" ;;
    share) java_apps share kafka-clients ShareDriver "${SHARE_RELEASES[@]}" ;;
    python) python_clients ;;
    go) go_clients ;;
    node) node_clients ;;
    kcat) kcat_client ;;
    *) say "unknown part $part (java streams share python go node kcat)"; exit 2 ;;
  esac
done
[ "$status" = 0 ] && say "ready: $clients"
exit $status
