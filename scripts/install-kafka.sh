#!/usr/bin/env bash
# Fetches Apache Kafka releases from Maven Central into a cache outside the tree.
#
#   scripts/install-kafka.sh                  the broker releases the tests use (KAFKA_RELEASES below)
#   scripts/install-kafka.sh 4.3.1 4.4.0      just these releases
#   scripts/install-kafka.sh --clients-only [VERSION...]
#                                             only kafka-clients and its runtime jars (the message definitions, the error table)
#   scripts/install-kafka.sh --print-dir      the cache directory, then exit
#
# Layout, under ${KPROTO_CACHE_DIR:-${XDG_CACHE_HOME:-~/.cache}/kproto}/kafka/<version>/:
#   libs/          the broker's runtime classpath (kafka_2.13 and its dependencies)
#   clients/       kafka-clients-<version>.jar and its runtime dependencies (slf4j, codecs),
#                  enough to load its classes (tools/gen_schema.py reads Kafka's error table)
#   .broker-ok, .clients-runtime-ok   written last, so a cut download is fetched again
# and kafka/slf4j-simple-<v>/: the logging backend tools/kafka_broker.py puts after libs/
# (the broker's Maven dependencies carry slf4j-api only, which logs nothing without one).
# Maven (mvn) resolves the artifacts with their dependencies; its own cache is ~/.m2.
# Exits non-zero, naming what is missing, when mvn, Java or an artifact cannot be had.
set -euo pipefail

# The newest patch of each release line the project checks against (Maven Central), and 4.0.0,
# which advertises and serves fewer JoinGroup versions than the later 4.0 patches (v2-9, not v0-9).
KAFKA_RELEASES=(3.9.2 4.0.0 4.0.2 4.1.2 4.2.2 4.3.1 4.4.0)

say() { echo "install-kafka: $*" >&2; }

cache_root=${KPROTO_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kproto}
kafka_root=$cache_root/kafka

clients_only=0
versions=()
for arg in "$@"; do
  case "$arg" in
    --clients-only) clients_only=1 ;;
    --print-dir) echo "$kafka_root"; exit 0 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) say "unknown option $arg"; exit 2 ;;
    *) versions+=("$arg") ;;
  esac
done
[ ${#versions[@]} -eq 0 ] && versions=("${KAFKA_RELEASES[@]}")

if ! command -v mvn >/dev/null 2>&1; then
  say "mvn (Apache Maven) is not on PATH: install it (Debian: apt-get install maven) and run again"
  exit 1
fi
if ! command -v java >/dev/null 2>&1; then
  say "java is not on PATH: Kafka needs a Java 17+ runtime (scripts/install-java.sh installs one)"
  exit 1
fi

# fetch VERSION ARTIFACT DEST TRANSITIVE [GROUP]: copy GROUP:ARTIFACT:VERSION (GROUP defaults to
# org.apache.kafka; with its runtime dependencies when TRANSITIVE is yes) into DEST (scripts/maven-fetch.sh).
fetch() {
  local version=$1 artifact=$2 dest=$3 transitive=$4 group=${5:-org.apache.kafka}
  "$(dirname "$0")/maven-fetch.sh" $([ "$transitive" = yes ] || echo --direct) "$dest" "$group:$artifact:$version"
}

status=0
for version in "${versions[@]}"; do
  dir=$kafka_root/$version
  mkdir -p "$dir"
  if [ ! -f "$dir/.clients-runtime-ok" ]; then
    say "kafka-clients $version with its runtime dependencies ..."
    if fetch "$version" kafka-clients "$dir/clients" yes; then
      touch "$dir/.clients-runtime-ok"
    else
      status=1; continue
    fi
  fi
  [ "$clients_only" = 1 ] && continue
  if [ ! -f "$dir/.broker-ok" ]; then
    started=$SECONDS
    say "broker kafka_2.13 $version with its dependencies ..."
    if fetch "$version" kafka_2.13 "$dir/libs" yes; then
      touch "$dir/.broker-ok"
      say "broker $version: $(ls "$dir/libs" | wc -l) jars, $(du -sh "$dir/libs" | cut -f1) ($((SECONDS - started)) s)"
    else
      status=1
    fi
  fi
done
# The brokers' logging backend: slf4j-simple of the slf4j-api line every release above ships (1.7.x).
SLF4J_SIMPLE=1.7.36
if [ "$clients_only" = 0 ] && [ ! -f "$kafka_root/slf4j-simple-$SLF4J_SIMPLE/.ok" ]; then
  say "slf4j-simple $SLF4J_SIMPLE (the brokers' log backend) ..."
  if fetch "$SLF4J_SIMPLE" slf4j-simple "$kafka_root/slf4j-simple-$SLF4J_SIMPLE" no org.slf4j; then
    touch "$kafka_root/slf4j-simple-$SLF4J_SIMPLE/.ok"
  else
    status=1
  fi
fi
[ "$status" = 0 ] && say "ready: $kafka_root (${versions[*]})"
exit $status
