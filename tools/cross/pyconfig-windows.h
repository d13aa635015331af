/* pyconfig.h for CPython on 64-bit Windows (python.org's amd64 builds), reduced to
   what the public headers (Python.h and what it includes) read. Used only by
   tools/cross_compile_check.py, which compiles kproto's generated C with zig cc for
   x86_64-windows-gnu (MinGW-w64 headers) on a Linux machine; the other headers come
   from this machine's CPython, which are the same on every platform. What matters
   here is Windows' LLP64 model (long is 32 bits), Py_ssize_t as a 64-bit integer,
   and the DLL import declarations of a Py_ENABLE_SHARED build. */
#ifndef Py_CONFIG_H
#define Py_CONFIG_H
#ifndef Py_PYCONFIG_H
#define Py_PYCONFIG_H
#include <limits.h>

#define MS_WIN32
#define MS_WINDOWS
#define MS_WIN64
#define NT_THREADS
#define WITH_THREAD
#define Py_ENABLE_SHARED 1
#define HAVE_DECLSPEC_DLL
#define PLATFORM "win32"

typedef long long Py_ssize_t;
#define PY_SSIZE_T_MAX LLONG_MAX
#define HAVE_PY_SSIZE_T 1

#define ALIGNOF_LONG 4
#define ALIGNOF_SIZE_T 8
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1
#define HAVE_CLOCK 1
#define HAVE_DYNAMIC_LOADING 1
#define HAVE_ERRNO_H 1
#define HAVE_FCNTL_H 1
#define HAVE_IO_H 1
#define HAVE_PROCESS_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_STDDEF_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_WCHAR_H 1
#define HAVE_LONG_LONG 1
#define PY_LONG_LONG long long

#define SIZEOF_DOUBLE 8
#define SIZEOF_FLOAT 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_HKEY 8
#define SIZEOF_INT 4
#define SIZEOF_LONG 4
#define SIZEOF_LONG_DOUBLE 8
#define SIZEOF_LONG_LONG 8
#define SIZEOF_OFF_T 4
#define SIZEOF_PID_T 8
#define SIZEOF_SHORT 2
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_UINTPTR_T 8
#define SIZEOF_VOID_P 8
#define SIZEOF_WCHAR_T 2
#define SIZEOF__BOOL 1

#define STDC_HEADERS 1
#define WITH_DOC_STRINGS 1
#define WITH_PYMALLOC 1

#endif /* Py_PYCONFIG_H */
#endif /* Py_CONFIG_H */
