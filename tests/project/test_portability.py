"""Portability (issue 19): the wheels promised for macOS and Windows, proven from Linux.

* the C of every extension module compiles for aarch64-macos, x86_64-macos and
  x86_64-windows with zig cc against each target's headers (tools/cross_compile_check.py);
* the workflow files pass actionlint, and cibuildwheel lists exactly the promised builds;
* setup.py's flags follow the compiler (MSVC gets /O2) and KPROTO_PORTABLE forces the fallbacks;
* the 128-bit timestamp arithmetic (a 64-bit-halves fallback without __int128) is exact.

The tools come from scripts/install-portability-tools.sh (make test installs them);
where they cannot be installed, those tests skip and say why. The forced-fallback
build runs the whole suite in `make test-portable`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
BIN = Path(sys.executable).parent
# The tests run from a copy beside an installed wheel too (cibuildwheel, ci.yml,
# build-proof): there the source tree's checks have nothing to check.
source_tree = pytest.mark.skipif(
    not all(
        (ROOT / part).exists()
        for part in ("setup.py", "kproto/_c", "tools/cross_compile_check.py", ".github/workflows")
    ),
    reason="needs the source tree (setup.py, kproto/_c, tools/, .github/)",
)


def load_setup():
    sys.path.insert(0, str(ROOT))
    try:
        import setup as project_setup  # setup() runs only when setup.py is __main__
    finally:
        sys.path.remove(str(ROOT))
    return project_setup


# ---------------------------------------------------------------- cross-compilation
@source_tree
def test_every_module_compiles_for_macos_and_windows():
    if os.environ.get("KPROTO_NO_EXTENSIONS") == "1":
        pytest.skip("the pure-Python run does not build C (the extension run checks it)")
    run = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "cross_compile_check.py"), "--require"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    print(run.stdout[-6000:], run.stderr[-2000:])
    if run.returncode == 2 and "SKIPPED" in run.stdout:
        pytest.skip(run.stdout.strip().splitlines()[-1])
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    rows = re.findall(r"^(\S+-(?:macos|windows-gnu))\s+(kproto\.\S+)\s+(\d+)\s", run.stdout, re.MULTILINE)
    pyx = sorted(p for p in (ROOT / "kproto").rglob("*.pyx"))
    assert len(rows) == 3 * len(pyx) and all(errors == "0" for _, _, errors in rows), rows


# ---------------------------------------------------------------- workflows and cibuildwheel
def tool(name: str) -> str:
    found = shutil.which(name, path=str(BIN)) or shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (scripts/install-portability-tools.sh)")
    return found


@source_tree
def test_workflows_pass_actionlint():
    actionlint = tool("actionlint")
    run = subprocess.run([actionlint, "-no-color", *map(str, WORKFLOWS)], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stdout + run.stderr


def pinned_cibuildwheel() -> str:
    text = (ROOT / ".github" / "workflows" / "wheels.yml").read_text()
    return re.search(r'CIBUILDWHEEL_VERSION: "([^"]+)"', text).group(1)


# The wheels.yml check job's 30: CPython 3.10-3.14 on each of these (build identifier suffixes).
PROMISED = {
    "linux": ["manylinux_x86_64", "manylinux_aarch64", "musllinux_x86_64"],
    "macos": ["macosx_x86_64", "macosx_arm64"],
    "windows": ["win_amd64"],
}


@source_tree
@pytest.mark.parametrize("platform", sorted(PROMISED))
def test_cibuildwheel_builds_exactly_what_is_promised(platform):
    cibuildwheel = tool("cibuildwheel")
    from importlib.metadata import version as installed

    version = installed("cibuildwheel")
    assert version == pinned_cibuildwheel(), (
        f"installed cibuildwheel {version}, wheels.yml pins {pinned_cibuildwheel()}"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("CIBW_")}
    run = subprocess.run(
        [cibuildwheel, "--platform", platform, "--print-build-identifiers"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    identifiers = sorted(run.stdout.split())
    expected = sorted(f"cp3{minor}-{suffix}" for minor in range(10, 15) for suffix in PROMISED[platform])
    assert identifiers == expected


# ---------------------------------------------------------------- setup.py
@source_tree
def test_compiler_flags_follow_the_compiler():
    project_setup = load_setup()
    msvc = project_setup.compile_args("msvc", environ={})
    assert msvc == ["/O2"]
    assert not any(flag.startswith("-") for flag in project_setup.compile_args("msvc", environ={"KPROTO_DEBUG": "1"}))
    assert project_setup.link_args("msvc", environ={"KPROTO_SANITIZE": "1"}) == []
    for kind in ("unix", "mingw32"):  # GCC and Clang, Apple's included
        assert project_setup.compile_args(kind, environ={})[:2] == ["-O3", "-fno-strict-aliasing"]


@source_tree
def test_portable_build_flag():
    project_setup = load_setup()
    assert ("KP_FORCE_PORTABLE", "1") in project_setup.define_macros("kproto._c._codec", portable=True)
    assert not any(
        name == "KP_FORCE_PORTABLE" for name, _ in project_setup.define_macros("kproto._c._codec", portable=False)
    )
    # the batch decoder asks kp_platform.h for forced inlining, on every compiler that has it
    assert ("KP_CYTHON_ALWAYS_INLINE", "1") in project_setup.define_macros("kproto._c._batch", portable=False)


@source_tree
def test_platform_specific_c_only_in_kp_platform_h():
    """The names of the issue stay behind kp_platform.h's feature tests."""
    c_dir = ROOT / "kproto" / "_c"
    pattern = re.compile(
        r"\b(mremap|MREMAP_MAYMOVE|MADV_HUGEPAGE|madvise|mmap|munmap|__int128|sys/mman\.h"
        r"|__builtin_bswap\d+|__BYTE_ORDER__|__x86_64__|__SSE2__|always_inline)\b"
    )
    offenders = []
    for path in sorted(c_dir.glob("*.pyx")) + sorted(c_dir.glob("*.pxd")) + sorted(c_dir.glob("*.h")):
        if path.name == "kp_platform.h":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0] if path.suffix in (".pyx", ".pxd") else line
            if pattern.search(code) and not code.lstrip().startswith(("/*", "*", "//")):
                offenders.append(f"{path.name}:{number}: {line.strip()}")
    assert not offenders, offenders


# ---------------------------------------------------------------- 128-bit arithmetic
@pytest.mark.parametrize("exponent", [1, 20, 31, 32, 33, 40, 63, 64, 65, 96, 127])
def test_binary_timestamp_resolution_is_exact(impl, exponent):
    """pcapng if_tsresol 2^-n: ns = units * 10^9 >> n over the full 128-bit product."""
    from tests.arrow.test_capture import conversation_packets, exchange, run
    from tests.pcapwriter import LINK_RAW, Conversation, PcapngWriter

    limit = (1 << 62) - 1
    units = min((1 << 64) - 1, ((limit << exponent) // 1_000_000_000) - 12345)
    units = max(units, 1)
    expected = (units * 1_000_000_000) >> exponent
    assert expected < 1 << 62
    requests, responses = exchange(1)
    writer = PcapngWriter()
    writer.units = lambda interface, ts_ns: units  # raw units, whatever the nanoseconds
    iface = writer.add_interface(LINK_RAW, tsresol=0x80 | exponent)
    conv = Conversation(client=("fd00::1", 40003), server=("fd00::2", 9092), linktype=LINK_RAW)
    for packet in conversation_packets(conv, requests, responses):
        writer.add(iface, 0, packet.data)
    frames, _, _ = run(writer.getvalue(), impl)
    assert frames and {f["ts_first_ns"] for f in frames} == {expected}
