"""Build script: compiles every .pyx under kproto/ into an extension module.

Environment:
  KPROTO_NO_EXTENSIONS=1  build a pure-Python package (no compiler needed).
  KPROTO_PORTABLE=1       define KP_FORCE_PORTABLE: every platform-specific C path
                          (mmap/mremap, __int128, SSE2/AVX-512/PCLMUL, byte-swap
                          builtins, always_inline) takes its plain-C fallback, as on a
                          platform that lacks them (kproto/_c/kp_platform.h).
  KPROTO_SANITIZE=1       build with AddressSanitizer + UndefinedBehaviorSanitizer.
  KPROTO_DEBUG=1          keep asserts and debug symbols, no optimisation.

Compiler flags follow the compiler, not the OS (docs/packaging.md): GCC and Clang,
Apple's included, get -O3 -fno-strict-aliasing; MSVC gets /O2 (its -O3 does not exist).

Where Cython writes its C (docs/packaging.md): under the build directory, never into kproto/.
`setup.py build_ext --inplace` (scripts/setup.sh) keeps its C in .build/temp.*/cython and its modules
in .build/lib.*-inplace, so the next in-place build redoes only what changed; package builds (pip
install ., pip wheel .) keep theirs in .build/temp.*/cython-package and .build/lib.*, so a build with
another Cython version (pip's isolated build) never makes `make` recompile nor changes what it
built. An sdist cythonizes nothing.
"""

import glob
import os
import sys
import tempfile
import time

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.errors import CCompilerError, CompileError, ExecError, LinkError
from setuptools.modified import newer_group

# Where setuptools builds (build_ext's temporaries, wheels' staging). Not "build": a
# build/ folder in the checkout shadows the `build` package, so `python -m build` there
# failed. A name with a dot is no importable module, so it can shadow nothing.
BUILD_BASE = ".build"

CYTHON_DIRECTIVES = {
    "language_level": "3",
    "boundscheck": False,
    "wraparound": False,
    "cdivision": True,
    "embedsignature": True,
}


def define_macros(name, portable=None):
    """C macros of one extension module (also used by tools/cross_compile_check.py)."""
    if portable is None:
        portable = os.environ.get("KPROTO_PORTABLE") == "1"
    macros = [("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")]
    if portable:
        macros.append(("KP_FORCE_PORTABLE", "1"))
    # The batch decoder's per-frame scan must be inlined into its loop; GCC's size
    # heuristics decline on their own (measured: ~30% of the header-only rate).
    # kp_platform.h turns this into the compiler's force-inline, where it has one.
    if name == "kproto._c._batch":
        macros.append(("KP_CYTHON_ALWAYS_INLINE", "1"))
    return macros


def compile_args(compiler_type, environ=os.environ):
    """Flags for a setuptools compiler type: "msvc", or "unix"/"mingw32"/... (GCC-like)."""
    debug = environ.get("KPROTO_DEBUG") == "1"
    if compiler_type == "msvc":
        return ["/Od", "/Zi"] if debug else ["/O2"]
    args = ["-O3", "-fno-strict-aliasing"]
    if debug:
        args += ["-O0", "-g"]
    if environ.get("KPROTO_SANITIZE") == "1":
        args += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
    return args


def link_args(compiler_type, environ=os.environ):
    if compiler_type != "msvc" and environ.get("KPROTO_SANITIZE") == "1":
        return ["-fsanitize=address,undefined"]
    return []


#: The last line of a failed compile: how to install without a C compiler.
PURE_INSTALL_HINT = (
    "kproto: the compiled extension could not be built ({what}). kproto also runs without it, "
    "as pure Python (slower, same results): KPROTO_NO_EXTENSIONS=1 pip install ."
)


def compile_failed(what, exc):
    """The compiler's error, then the hint as the build's last word (setuptools prints it as "error: ...")."""
    progress(f"{what} failed: {exc}")
    return CompileError(PURE_INSTALL_HINT.format(what=what))


def progress(text):
    """One line of build progress; scripts/setup.sh shows the lines starting "kproto build:"."""
    print(f"kproto build: {text}", file=sys.stderr, flush=True)


class BuildExt(build_ext):
    """Cythonizes (into the build directory), checks the C compiler first,
    adds the flags of the compiler actually used (known only once it is chosen), says how
    long each module took, and ends a failed compile with the pure-Python install."""

    def finalize_options(self):
        super().finalize_options()
        # setuptools builds in-place modules in build_lib too, then copies them into kproto/:
        # a build_lib of their own, so a package build never hands its modules to the checkout.
        if self.inplace:
            self.build_lib = self.build_lib.rstrip("/\\") + "-inplace"

    def run(self):
        # setuptools clears `inplace` while it builds (it copies the modules into place after).
        self.for_checkout = bool(self.inplace or getattr(self, "editable_mode", False))
        super().run()

    def build_extensions(self):
        kind = self.compiler.compiler_type
        self.check_compiler()
        # Cython regenerates C made by another Cython version, and pip's isolated build may
        # bring one: package builds get C files of their own, so the checkout's stay current.
        c_dir = os.path.join(self.build_temp, "cython" if getattr(self, "for_checkout", True) else "cython-package")
        started = time.monotonic()
        # The same Extension objects keep their setuptools bookkeeping; only the sources change.
        generated = {ext.name: ext.sources for ext in cythonize_extensions(self.extensions, c_dir)}
        for ext in self.extensions:
            ext.sources = generated[ext.name]
        progress(f"cythonized {len(self.extensions)} modules ({time.monotonic() - started:.0f} s)")
        for ext in self.extensions:
            ext.extra_compile_args = compile_args(kind) + list(ext.extra_compile_args or [])
            ext.extra_link_args = link_args(kind) + list(ext.extra_link_args or [])
        super().build_extensions()

    def build_extension(self, ext):
        # build_ext's own test: the module is rebuilt when a source or dependency is newer.
        if not (
            self.force or newer_group(ext.sources + list(ext.depends or []), self.get_ext_fullpath(ext.name), "newer")
        ):
            progress(f"{ext.name} up to date")
            return
        started = time.monotonic()
        try:
            super().build_extension(ext)
        except (CCompilerError, CompileError, LinkError, ExecError, OSError) as exc:
            raise compile_failed(f"compiling {ext.name}", exc) from exc
        progress(f"{ext.name} compiled ({time.monotonic() - started:.0f} s)")

    def check_compiler(self):
        """Compile an empty C file before the minutes of real work, so a missing or broken
        compiler fails in a second, with the pure-Python hint."""
        with tempfile.TemporaryDirectory() as tmp:
            probe = os.path.join(tmp, "kproto_probe.c")
            with open(probe, "w", encoding="utf-8") as f:
                f.write("int kproto_probe(void) { return 0; }\n")
            try:
                self.compiler.compile([probe], output_dir=tmp)  # the object lands under tmp too
            except (CCompilerError, CompileError, ExecError, OSError) as exc:
                raise compile_failed("the C compiler check", exc) from exc


def pure_build(environ=os.environ):
    """True when this build makes the pure-Python package (no extension to compile)."""
    return environ.get("KPROTO_NO_EXTENSIONS") == "1"


def build_info_source(pure):
    """The text of kproto/_build_info.py as installed: how the package was built."""
    return (
        '"""Written by setup.py when the package was built; not in the source tree."""\n\n'
        "#: False when the package was built without its compiled extension on purpose\n"
        "#: (KPROTO_NO_EXTENSIONS=1 at install time): kproto then runs pure Python quietly.\n"
        f"EXTENSION_BUILT = {not pure}\n"
    )


class BuildPy(build_py):
    """Records in the built package whether it carries the extension (kproto/_impl.py reads it)."""

    def run(self):
        super().run()
        # An editable install runs the source tree, which has no _build_info: it expects the extension.
        if not self.dry_run and not getattr(self, "editable_mode", False):
            target = os.path.join(self.build_lib, "kproto", "_build_info.py")
            with open(target, "w", encoding="utf-8") as f:
                f.write(build_info_source(pure_build()))


def extensions():
    """The extension modules, as Cython sources (.pyx): BuildExt cythonizes them when it builds."""
    if pure_build():
        return []
    import numpy

    modules = []
    for path in sorted(glob.glob("kproto/**/*.pyx", recursive=True)):
        name = path[:-4].replace("/", ".").replace("\\", ".")
        modules.append(
            Extension(
                name,
                [path],
                include_dirs=["kproto/_c", numpy.get_include()],
                define_macros=define_macros(name),
            )
        )
    return modules


def cythonize_extensions(modules, c_dir):
    """The modules with their C sources in c_dir, generated again only where a .pyx (or what it
    includes) changed, or another Cython version made them (tools/cross_compile_check.py uses this too)."""
    from Cython.Build import cythonize

    return cythonize(modules, compiler_directives=CYTHON_DIRECTIVES, include_path=["kproto/_c"], build_dir=c_dir)


if __name__ == "__main__":
    os.makedirs(BUILD_BASE, exist_ok=True)  # egg_info (metadata, sdists) writes there and needs it to exist
    setup(
        ext_modules=extensions(),
        cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
        options={"build": {"build_base": BUILD_BASE}, "egg_info": {"egg_base": BUILD_BASE}},
    )
