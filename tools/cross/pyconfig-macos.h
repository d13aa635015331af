/* pyconfig.h for a CPython build on macOS (arm64 or x86_64), reduced to what the
   public headers (Python.h and what it includes) read. Used only by
   tools/cross_compile_check.py to compile kproto's generated C for macOS on a Linux
   machine: the other headers come from this machine's CPython, which are the same
   on every platform; the sizes and features below are the macOS ones (LP64,
   little-endian, 64-bit long double on arm64). */
#ifndef Py_PYCONFIG_H
#define Py_PYCONFIG_H

#define _DARWIN_C_SOURCE 1

#define ALIGNOF_LONG 8
#define ALIGNOF_SIZE_T 8
#define DOUBLE_IS_LITTLE_ENDIAN_IEEE754 1
#define HAVE_CLOCK 1
#define HAVE_DYNAMIC_LOADING 1
#define HAVE_ERRNO_H 1
#define HAVE_FCNTL_H 1
#define HAVE_FORK 1
#define HAVE_INTTYPES_H 1
#define HAVE_LONG_DOUBLE 1
#define HAVE_PTHREAD_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_SSIZE_T 1
#define HAVE_STDARG_PROTOTYPES 1
#define HAVE_STDINT_H 1
#define HAVE_STDLIB_H 1
#define HAVE_STD_ATOMIC 1
#define HAVE_STRINGS_H 1
#define HAVE_STRING_H 1
#define HAVE_SYS_PARAM_H 1
#define HAVE_SYS_SELECT_H 1
#define HAVE_SYS_STAT_H 1
#define HAVE_SYS_TIME_H 1
#define HAVE_SYS_TYPES_H 1
#define HAVE_UNISTD_H 1
#define HAVE_WCHAR_H 1
#define HAVE_BUILTIN_ATOMIC 1
#define HAVE_COMPUTED_GOTOS 1

#define SIZEOF_DOUBLE 8
#define SIZEOF_FLOAT 4
#define SIZEOF_FPOS_T 8
#define SIZEOF_INT 4
#define SIZEOF_LONG 8
#if defined(__aarch64__) || defined(__arm64__)
#define SIZEOF_LONG_DOUBLE 8
#else
#define SIZEOF_LONG_DOUBLE 16
#endif
#define SIZEOF_LONG_LONG 8
#define SIZEOF_OFF_T 8
#define SIZEOF_PID_T 4
#define SIZEOF_PTHREAD_KEY_T 8
#define SIZEOF_PTHREAD_T 8
#define SIZEOF_SHORT 2
#define SIZEOF_SIZE_T 8
#define SIZEOF_TIME_T 8
#define SIZEOF_UINTPTR_T 8
#define SIZEOF_VOID_P 8
#define SIZEOF_WCHAR_T 4
#define SIZEOF__BOOL 1

#define STDC_HEADERS 1
#define WITH_DOC_STRINGS 1
#define WITH_PYMALLOC 1
#define WITH_NEXT_FRAMEWORK 1
#define PY_SUPPORT_TIER 1

#endif /* Py_PYCONFIG_H */
