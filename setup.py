"""Build script: compiles every .pyx under kproto/ into an extension module.

Environment:
  KPROTO_NO_EXTENSIONS=1  build a pure-Python package (no compiler needed).
  KPROTO_SANITIZE=1       build with AddressSanitizer + UndefinedBehaviorSanitizer.
  KPROTO_DEBUG=1          keep asserts and debug symbols, no optimisation.
"""

import glob
import os
import sys

from setuptools import Extension, setup


def module_macros(name):
    # The batch decoder's per-frame scan must be inlined into its loop; GCC's size
    # heuristics decline on their own (measured: ~30% of the header-only rate).
    if name == "kproto._c._batch" and sys.platform != "win32":
        return [("CYTHON_INLINE", "inline __attribute__((always_inline))")]
    return []


def extensions():
    if os.environ.get("KPROTO_NO_EXTENSIONS") == "1":
        return []
    from Cython.Build import cythonize
    import numpy

    compile_args, link_args = [], []
    if sys.platform != "win32":
        compile_args += ["-O3", "-fno-strict-aliasing"]
        if os.environ.get("KPROTO_DEBUG") == "1":
            compile_args += ["-O0", "-g"]
        if os.environ.get("KPROTO_SANITIZE") == "1":
            sanitize = ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-g"]
            compile_args += sanitize
            link_args += sanitize
    modules = []
    for path in sorted(glob.glob("kproto/**/*.pyx", recursive=True)):
        name = path[:-4].replace("/", ".").replace("\\", ".")
        modules.append(Extension(
            name,
            [path],
            include_dirs=["kproto/_c", numpy.get_include()],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")] + module_macros(name),
        ))
    return cythonize(
        modules,
        compiler_directives={"language_level": "3", "boundscheck": False, "wraparound": False,
                             "cdivision": True, "embedsignature": True},
        include_path=["kproto/_c"],
    )


setup(ext_modules=extensions())
