#!/usr/bin/env bash
# Installs a headless Chromium (Debian's chromium-headless-shell) for the report's
# browser checks (tests/analyze/test_report_browser.py, tools/report_screenshot.py).
#
# Idempotent and never fails its caller: when nothing can be installed (no root, no
# apt-get, no network) it says why and exits 0; the browser tests then skip with a reason.
set -u

say() { echo "install-browser: $*"; }

for name in chromium-headless-shell chromium chromium-browser google-chrome; do
    if command -v "$name" >/dev/null 2>&1; then
        say "already present: $(command -v "$name")"
        exit 0
    fi
done
if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found; install Chromium by hand (or set KPROTO_CHROMIUM) to run the report's browser tests"
    exit 0
fi
SUDO=""
if [ "$(id -u)" != "0" ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
        SUDO="sudo -n"
    else
        say "not root and no password-less sudo; cannot install chromium-headless-shell"
        exit 0
    fi
fi
export DEBIAN_FRONTEND=noninteractive
if [ -z "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ]; then
    $SUDO apt-get update -qq >/dev/null 2>&1 || say "apt-get update failed; trying the cached lists"
fi
say "installing chromium-headless-shell (apt) for the report's browser tests ..."
install() { $SUDO apt-get install -y -qq --no-install-recommends chromium-headless-shell >/dev/null 2>&1; }
if install || { $SUDO apt-get update -qq >/dev/null 2>&1 && install; }; then
    say "installed chromium-headless-shell"
else
    say "could not install chromium-headless-shell; the report's browser tests will be skipped"
fi
exit 0
