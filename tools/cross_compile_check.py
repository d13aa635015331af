"""Compile the generated C of every extension module for the non-Linux wheel targets.

The wheels promise macOS (arm64, x86_64) and Windows (amd64), and CI runners for
them are not available here. This check compiles each module's Cython output with
`zig cc` (pip package `ziglang`: clang plus macOS and MinGW-w64 libc headers) for

    aarch64-macos, x86_64-macos, x86_64-windows-gnu

against that target's headers: numpy's from the target's own numpy wheel (PyPI,
cached), CPython's from this interpreter with the target's pyconfig.h
(tools/cross/pyconfig-*.h; the rest of CPython's headers is the same everywhere).
The macros and flags are setup.py's own (define_macros, compile_args). Any error
fails the check; implicit function declarations are errors (as in Apple clang).

    python tools/cross_compile_check.py [--target T ...] [--module M ...] [--optimize]

Exit status: 0 all compiled, 1 an error, 0 with "SKIPPED:" when zig or a target's
numpy headers cannot be had (no ziglang installed, no PyPI): scripts/install-
portability-tools.sh installs ziglang. --require turns a skip into exit status 2.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CROSS = Path(__file__).resolve().parent / "cross"

# zig target -> (numpy wheel platform tag, pyconfig.h, setuptools compiler type of the real build)
TARGETS = {
    "aarch64-macos": ("macosx_14_0_arm64", "pyconfig-macos.h", "unix"),
    "x86_64-macos": ("macosx_14_0_x86_64", "pyconfig-macos.h", "unix"),
    "x86_64-windows-gnu": ("win_amd64", "pyconfig-windows.h", "msvc"),
}
# What Apple clang and GCC 14 already treat as errors (a missing declaration such as
# mremap's on macOS would otherwise only warn here, and fail later at load time).
# A discarded const stays a warning, as there.
STRICT = [
    "-Werror=implicit-function-declaration",
    "-Werror=implicit-int",
    "-Werror=int-conversion",
    "-Werror=incompatible-pointer-types",
    "-Wno-error=incompatible-pointer-types-discards-qualifiers",
]


class Skip(Exception):
    """The check cannot run here (no zig, no target headers)."""


@dataclass
class Result:
    target: str
    module: str
    errors: int
    warnings: int
    seconds: float
    output: str


def cache_dir() -> Path:
    """Under kproto's one cache directory (kproto/_common/cache.py); KPROTO_CROSS_CACHE moves only this."""
    base = os.environ.get("KPROTO_CROSS_CACHE")
    if base:
        return Path(base)
    sys.path.insert(0, str(ROOT))
    try:
        from kproto._common.cache import cache_root
    finally:
        sys.path.remove(str(ROOT))
    return cache_root() / "cross"


def zig_command() -> list[str]:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise Skip("zig is not installed (pip package 'ziglang'; scripts/install-portability-tools.sh)") from None
    cmd = [sys.executable, "-m", "ziglang"]
    probe = subprocess.run(cmd + ["version"], capture_output=True, text=True)
    if probe.returncode != 0:
        raise Skip(f"'python -m ziglang version' failed: {probe.stderr.strip()[:200]}")
    return cmd


def numpy_version() -> str:
    import numpy

    return numpy.__version__


def numpy_headers(target: str) -> Path:
    """numpy's C headers from the target's own wheel (same numpy version as here)."""
    platform_tag = TARGETS[target][0]
    version = numpy_version()
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    dest = cache_dir() / f"numpy-{version}-cp{py}-{platform_tag}"
    include = dest / "numpy" / "_core" / "include"
    if (include / "numpy" / "_numpyconfig.h").is_file():
        return include
    wheels = cache_dir() / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    pattern = f"numpy-{version}-cp{py}-cp{py}-*{platform_tag.split('_', 1)[0]}*{platform_tag.rsplit('_', 1)[-1]}.whl"
    found = sorted(wheels.glob(pattern))
    if not found:
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--disable-pip-version-check",
                "-q",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                platform_tag,
                "--python-version",
                py,
                "--implementation",
                "cp",
                "-d",
                str(wheels),
                f"numpy=={version}",
            ],
            capture_output=True,
            text=True,
        )
        found = sorted(wheels.glob(pattern))
        if run.returncode != 0 or not found:
            raise Skip(
                f"cannot download numpy {version} for {platform_tag} (PyPI unreachable?): {run.stderr.strip()[-300:]}"
            )
    tmp = dest.with_suffix(".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(found[-1]) as zf:
        for name in zf.namelist():
            if name.startswith("numpy/_core/include/"):
                zf.extract(name, tmp)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return include


def python_headers(target: str) -> Path:
    """This interpreter's CPython headers, with the target's pyconfig.h in their directory
    (Python.h includes "pyconfig.h" from its own directory first)."""
    pyconfig = CROSS / TARGETS[target][1]
    source = Path(sysconfig.get_paths()["include"])
    dest = cache_dir() / f"python{sys.version_info.major}.{sys.version_info.minor}-{pyconfig.stem}"
    stamp = dest / ".source"
    wanted = f"{source} {pyconfig.stat().st_mtime_ns}"
    if not (stamp.is_file() and stamp.read_text() == wanted):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest, symlinks=False)
        shutil.copyfile(pyconfig, dest / "pyconfig.h")
        stamp.write_text(wanted)
    return dest


def generated_sources() -> dict[str, Path]:
    """Module name -> its generated C, cythonized as setup.py does (skipped when up to date)."""
    sys.path.insert(0, str(ROOT))
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        import setup as project_setup  # the repository's setup.py (setup() runs only as __main__)

        c_dir = os.path.join(project_setup.BUILD_BASE, "cython-cross")
        extensions = project_setup.cythonize_extensions(project_setup.extensions(), c_dir)
    finally:
        os.chdir(cwd)
        sys.path.remove(str(ROOT))
    return {ext.name: ROOT / ext.sources[0] for ext in extensions}


def compile_one(
    zig: list[str], target: str, module: str, source: Path, include: list[Path], optimize: bool, out_dir: Path
) -> Result:
    sys.path.insert(0, str(ROOT))
    try:
        import setup as project_setup
    finally:
        sys.path.remove(str(ROOT))
    kind = TARGETS[target][2]
    if optimize:
        # The real build's optimisation (MSVC's /O2 becomes -O2 for clang).
        flags = ["-O2"] if kind == "msvc" else project_setup.compile_args(kind, environ={})
    else:
        flags = ["-O0"]
    macros = [f"-D{name}={value}" for name, value in project_setup.define_macros(module, portable=False)]
    cmd = zig + [
        "cc",
        "-target",
        target,
        "-c",
        str(source),
        "-o",
        str(out_dir / f"{target}-{module}.o"),
        "-fno-caret-diagnostics",
        *flags,
        *STRICT,
        *macros,
    ]
    for path in include:
        cmd += ["-I", str(path)]
    # A cache of its own per run: on a hit of zig's global cache the compiler does not
    # run and prints no diagnostics, so warnings would go uncounted.
    cache = str(out_dir / "zig-cache")
    env = dict(os.environ, ZIG_GLOBAL_CACHE_DIR=cache, ZIG_LOCAL_CACHE_DIR=cache)
    started = time.monotonic()
    run = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        preexec_fn=lambda: os.nice(19) if hasattr(os, "nice") else None,
    )
    output = run.stdout + run.stderr
    errors = len(re.findall(r": (?:fatal )?error: ", output))
    if run.returncode != 0 and errors == 0:
        errors = 1  # a failure without a diagnostic (the driver's own error) still counts
    warnings = len(re.findall(r": warning: ", output))
    return Result(target, module, errors, warnings, time.monotonic() - started, output)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", action="append", choices=sorted(TARGETS), help="default: all three")
    parser.add_argument("--module", action="append", help="e.g. kproto._c._batch (default: every module)")
    parser.add_argument(
        "--optimize",
        action="store_true",
        help="compile with the real build's optimisation flags (slower) instead of -O0",
    )
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--require", action="store_true", help="exit status 2 instead of 0 when skipped")
    parser.add_argument("--verbose", action="store_true", help="print every diagnostic")
    args = parser.parse_args(argv)
    targets = args.target or list(TARGETS)
    try:
        zig = zig_command()
        version = subprocess.run(zig + ["version"], capture_output=True, text=True).stdout.strip()
        includes = {t: [ROOT / "kproto" / "_c", numpy_headers(t), python_headers(t)] for t in targets}
    except Skip as why:
        print(f"cross-compile check SKIPPED: {why}")
        return 2 if args.require else 0
    sources = generated_sources()
    modules = args.module or sorted(sources)
    unknown = [m for m in modules if m not in sources]
    if unknown:
        parser.error(f"unknown modules {unknown}; have {sorted(sources)}")
    print(
        f"cross-compile check: zig {version}, Python {sys.version_info.major}.{sys.version_info.minor} headers, "
        f"numpy {numpy_version()} headers of each target, {'optimised' if args.optimize else '-O0'}"
    )
    with (
        tempfile.TemporaryDirectory(prefix="kproto-cross-") as out,
        concurrent.futures.ThreadPoolExecutor(max(1, args.jobs)) as pool,
    ):
        jobs = [
            pool.submit(compile_one, zig, t, m, sources[m], includes[t], args.optimize, Path(out))
            for t in targets
            for m in modules
        ]
        results = [job.result() for job in jobs]
    width = max(len(m) for m in modules)
    print(f"{'target':<20} {'module':<{width}} {'errors':>6} {'warnings':>8} {'seconds':>7}")
    for r in results:
        print(f"{r.target:<20} {r.module:<{width}} {r.errors:>6} {r.warnings:>8} {r.seconds:>7.1f}")
    failed = [r for r in results if r.errors]
    for r in results:
        if r.errors or args.verbose:
            lines = [line for line in r.output.splitlines() if ": error: " in line or args.verbose]
            print(f"\n--- {r.target} {r.module}:\n" + "\n".join(lines[:40]))
    total = sum(r.errors for r in results)
    print(
        f"\ncross-compile check: {len(results)} compilations, {total} errors, "
        f"{sum(r.warnings for r in results)} warnings: {'FAILED' if failed else 'passed'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
