#!/usr/bin/env bash
# Installs tcpdump (and, if that fails, tshark) so the loopback capture test can run.
#
# Idempotent and never fails its caller: when nothing can be installed (no root,
# no apt-get, no network) it says why and exits 0; the test then skips with a reason.
set -u

say() { echo "install-capture-tools: $*"; }

if command -v tcpdump >/dev/null 2>&1 || command -v tshark >/dev/null 2>&1; then
    say "already present: $(command -v tcpdump || command -v tshark)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found; install tcpdump or tshark by hand to run the loopback capture test"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        say "not root and no password-less sudo; cannot install tcpdump"
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
say "installing tcpdump (apt; tshark if tcpdump cannot be) for the loopback capture test ..."
# Package lists are refreshed only when apt has none yet (keeps repeated runs fast).
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ]; then
    $SUDO apt-get update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the cached lists"
fi
if $SUDO apt-get install -y -qq --no-install-recommends tcpdump >/dev/null 2>&1; then
    say "installed tcpdump"
    exit 0
fi
# The lists may be stale: refresh once and retry, then fall back to tshark.
$SUDO apt-get update -qq >/dev/null 2>&1
if $SUDO apt-get install -y -qq --no-install-recommends tcpdump >/dev/null 2>&1; then
    say "installed tcpdump"
elif echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections 2>/dev/null \
        && $SUDO apt-get install -y -qq --no-install-recommends tshark >/dev/null 2>&1; then
    say "installed tshark"
else
    say "could not install tcpdump or tshark; the loopback capture test will be skipped"
fi
exit 0
