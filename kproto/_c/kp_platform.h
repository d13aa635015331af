/* Everything in kproto's C that is not plain C11 + the Python C API, in one place.

   Each feature is a KP_HAVE_* macro decided here by a feature test, and every user
   has a plain-C fallback for when it is absent:

     KP_HAVE_ALWAYS_INLINE   KP_ALWAYS_INLINE forces inlining (GCC/Clang attribute,
                             MSVC __forceinline); else it is plain `inline`
     KP_HAVE_BSWAP           KP_BSWAP16/32/64 are compiler byte-swap builtins
     KP_LITTLE_ENDIAN_HOST / KP_BIG_ENDIAN_HOST
                             the host byte order, when the compiler tells it; with
                             neither, kp_endian.h assembles values byte by byte
     KP_HAVE_INT128          unsigned __int128 (kp_mul_shr_u64 uses 64-bit halves without)
     KP_HAVE_SSE2            <emmintrin.h> (kp_flags.h: else one 64-bit word at a time)
     KP_HAVE_X86_CRC32       SSE4.2 crc32 and AVX-512 VPCLMULQDQ through target
                             attributes, chosen at run time by __builtin_cpu_supports
                             (kp_crc32c.h: else slice-by-8 tables)
     KP_HAVE_MMAP            POSIX anonymous maps (the shared read-only zeros)
     KP_HAVE_MREMAP          Linux mremap (column memory grows by remapping pages;
                             else malloc/realloc/free)

   Building with KP_FORCE_PORTABLE defined (KPROTO_PORTABLE=1 python setup.py ...)
   turns every one of them off, so the fallbacks can be tested on Linux: the whole
   test suite runs on that build (make test-portable). */
#ifndef KP_PLATFORM_H
#define KP_PLATFORM_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define KP_GNUC_LIKE 1
#endif

/* ---- forced inlining ---- */
#if !defined(KP_FORCE_PORTABLE) && defined(KP_GNUC_LIKE)
#define KP_HAVE_ALWAYS_INLINE 1
#define KP_ALWAYS_INLINE inline __attribute__((always_inline))
#elif !defined(KP_FORCE_PORTABLE) && defined(_MSC_VER)
#define KP_HAVE_ALWAYS_INLINE 1
#define KP_ALWAYS_INLINE __forceinline
#else
#define KP_ALWAYS_INLINE inline
#endif

/* A module built with KP_CYTHON_ALWAYS_INLINE (setup.py: the batch decoder, whose
   per-frame scan must be inlined into its loop; GCC's size heuristics decline on
   their own) has every later `cdef inline` function force-inlined. Cython has
   defined CYTHON_INLINE by the time this header is included. */
#if defined(KP_CYTHON_ALWAYS_INLINE) && defined(KP_HAVE_ALWAYS_INLINE) && defined(CYTHON_INLINE)
#undef CYTHON_INLINE
#define CYTHON_INLINE KP_ALWAYS_INLINE
#endif

/* ---- byte order and byte swaps ---- */
#if !defined(KP_FORCE_PORTABLE)
#if defined(_MSC_VER)
#include <stdlib.h>
#define KP_HAVE_BSWAP 1
#define KP_BSWAP16 _byteswap_ushort
#define KP_BSWAP32 _byteswap_ulong
#define KP_BSWAP64 _byteswap_uint64
#elif defined(KP_GNUC_LIKE)
#define KP_HAVE_BSWAP 1
#define KP_BSWAP16 __builtin_bswap16
#define KP_BSWAP32 __builtin_bswap32
#define KP_BSWAP64 __builtin_bswap64
#endif
#if defined(__BYTE_ORDER__) && defined(__ORDER_LITTLE_ENDIAN__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define KP_LITTLE_ENDIAN_HOST 1
#elif defined(__BYTE_ORDER__) && defined(__ORDER_BIG_ENDIAN__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KP_BIG_ENDIAN_HOST 1
#elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86) || defined(_M_ARM64) || defined(_M_ARM))
#define KP_LITTLE_ENDIAN_HOST 1   /* every Windows target is little-endian */
#endif
#endif

/* ---- 128-bit arithmetic ---- */
#if !defined(KP_FORCE_PORTABLE) && defined(__SIZEOF_INT128__)
#define KP_HAVE_INT128 1
#endif

/* The low 64 bits of (a * b) >> shift, the product taken exactly (128 bits); 0 <= shift < 128. */
static inline uint64_t kp_mul_shr_u64(uint64_t a, uint64_t b, unsigned shift) {
#ifdef KP_HAVE_INT128
    return (uint64_t)(((unsigned __int128)a * b) >> shift);
#else
    uint64_t a_lo = a & 0xFFFFFFFFu, a_hi = a >> 32, b_lo = b & 0xFFFFFFFFu, b_hi = b >> 32;
    uint64_t ll = a_lo * b_lo, lh = a_lo * b_hi, hl = a_hi * b_lo, hh = a_hi * b_hi;
    uint64_t mid = (ll >> 32) + (lh & 0xFFFFFFFFu) + (hl & 0xFFFFFFFFu);
    uint64_t lo = (mid << 32) | (ll & 0xFFFFFFFFu);
    uint64_t hi = hh + (lh >> 32) + (hl >> 32) + (mid >> 32);
    if (shift == 0)
        return lo;
    if (shift < 64)
        return (lo >> shift) | (hi << (64 - shift));
    return hi >> (shift - 64);
#endif
}

/* ---- x86 SIMD ---- */
#if !defined(KP_FORCE_PORTABLE) && \
    (defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2))
#define KP_HAVE_SSE2 1
#endif

/* Target attributes for SSE4.2 / AVX-512 / VPCLMULQDQ functions and run-time CPU
   dispatch: GCC 8+ and Clang 6+ (Apple clang 10+) on x86-64, not MSVC. */
#if !defined(KP_FORCE_PORTABLE) && defined(__x86_64__) && defined(KP_GNUC_LIKE) && \
    ((defined(__apple_build_version__) && __clang_major__ >= 10) || \
     (defined(__clang__) && !defined(__apple_build_version__) && __clang_major__ >= 6) || \
     (!defined(__clang__) && __GNUC__ >= 8))
#define KP_HAVE_X86_CRC32 1
/* Clang 14+ (Apple clang 14+) gives the crc32 instruction a target feature of its
   own, which target("sse4.2") no longer enables for its intrinsics; GCC knows it too. */
#if !defined(__clang__) || __clang_major__ >= 14
#define KP_X86_CRC32_FEATURES "sse4.2,crc32"
#else
#define KP_X86_CRC32_FEATURES "sse4.2"
#endif
#endif

/* ---- column memory ---- */
#if !defined(KP_FORCE_PORTABLE) && (defined(__unix__) || defined(__APPLE__))
#include <sys/mman.h>
#if defined(MAP_ANONYMOUS)
#define KP_MAP_ANONYMOUS MAP_ANONYMOUS
#elif defined(MAP_ANON)
#define KP_MAP_ANONYMOUS MAP_ANON
#endif
#ifdef KP_MAP_ANONYMOUS
#define KP_HAVE_MMAP 1
#endif
/* mremap needs _GNU_SOURCE, which Python.h (pyconfig.h) defines on Linux. */
#if defined(KP_HAVE_MMAP) && defined(__linux__) && defined(MREMAP_MAYMOVE)
#define KP_HAVE_MREMAP 1
#endif
#endif

/* Read-only zeros of `bytes` bytes, never freed (arrays may point into them), or
   NULL where there is no cheap way to have them (then columns are written). */
static inline void *kp_zero_map(size_t bytes) {
#ifdef KP_HAVE_MMAP
#ifdef MAP_NORESERVE
    void *p = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | KP_MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
#else
    void *p = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | KP_MAP_ANONYMOUS, -1, 0);
#endif
    return p == MAP_FAILED ? NULL : p;
#else
    (void)bytes;
    return NULL;
#endif
}

/* Allocate (p NULL) or resize a column of old_bytes to new_bytes, contents kept up
   to the smaller size (new bytes are not zeroed); NULL when out of memory, and p
   is then still valid. Sizes are what the caller asked for before: free with the same. */
static inline void *kp_column_resize(void *p, size_t old_bytes, size_t new_bytes) {
#ifdef KP_HAVE_MREMAP
    void *q;
    if (p == NULL)
        q = mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | KP_MAP_ANONYMOUS, -1, 0);
    else if (new_bytes == old_bytes)
        return p;
    else
        q = mremap(p, old_bytes, new_bytes, MREMAP_MAYMOVE);
    if (q == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    /* fresh pages for tens of megabytes of columns: 4 KiB faults would cost more than decoding */
    if (new_bytes >= ((size_t)2 << 20))
        madvise(q, new_bytes, MADV_HUGEPAGE);
#endif
    return q;
#else
    (void)old_bytes;
    return realloc(p, new_bytes ? new_bytes : 1);
#endif
}

static inline void kp_column_free(void *p, size_t bytes) {
#ifdef KP_HAVE_MREMAP
    munmap(p, bytes);
#else
    (void)bytes;
    free(p);
#endif
}
#endif
