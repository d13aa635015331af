#!/usr/bin/env bash
# Installs a Java runtime (17 or newer) for Spark's local mode, when `java` is absent or too old.
#
# Idempotent: a usable `java` on PATH (or in JAVA_HOME) means nothing to do. Otherwise it
# installs a headless JRE with apt-get (as root, or with password-less sudo). Exits non-zero
# only when Java is missing and cannot be installed, saying what to do instead.
set -u

say() { echo "install-java: $*"; }

java_major() {
    # "openjdk version "17.0.15" ..." or "java version "1.8.0_392"" -> 17 / 8
    "$1" -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit }'
}

for candidate in "${JAVA_HOME:+$JAVA_HOME/bin/java}" "$(command -v java 2>/dev/null)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then
        major=$(java_major "$candidate")
        if [ -n "$major" ] && [ "$major" -ge 17 ]; then
            say "already present: $candidate (Java $major)"
            exit 0
        fi
        say "found $candidate (Java ${major:-?}), Spark 4 needs 17 or newer"
    fi
done

if ! command -v apt-get >/dev/null 2>&1; then
    say "no apt-get here: install a Java 17+ runtime (e.g. Temurin) and put it on PATH"
    exit 1
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        say "not root and no password-less sudo: run 'sudo apt-get install openjdk-17-jre-headless'"
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
say "installing a Java 17+ runtime for Spark (apt: default-jre-headless, else openjdk-17/21) ..."
$SUDO apt-get update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the cached lists"
# The distribution's default JRE first (Debian 12: 17, Debian 13 / Ubuntu 24.04: 21), then named versions.
for package in default-jre-headless openjdk-17-jre-headless openjdk-21-jre-headless; do
    if $SUDO apt-get install -y -qq --no-install-recommends "$package" >/dev/null 2>&1; then
        java_bin=$(command -v java || true)
        major=$([ -n "$java_bin" ] && java_major "$java_bin")
        if [ -n "$major" ] && [ "$major" -ge 17 ]; then
            say "installed $package (Java $major)"
            exit 0
        fi
    fi
done
say "could not install a Java 17+ runtime with apt-get; install one by hand for kproto analyze"
exit 1
