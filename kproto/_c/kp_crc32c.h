/* CRC-32C (Castagnoli), the checksum of Kafka record batches (magic 2).

   Three implementations with one entry point, kp_crc32c():
   - x86-64 with AVX-512 and VPCLMULQDQ, inputs of 1 KiB and more: carry-less
     multiplication folds 256 bytes per step into four 512-bit accumulators
     (about four times the crc32 instruction's 8 bytes per cycle), then the
     crc32 instruction reduces the last 16 folded bytes and the tail;
   - x86-64 with SSE4.2: the crc32 instruction, run as three independent streams
     over thirds of the input (the instruction has a latency of 3 cycles and a
     throughput of 1), whose results are then joined with crc_combine;
   - everywhere else (and in a KP_FORCE_PORTABLE build): slice-by-8 tables,
     built on first use.
   Both compute the standard CRC (initial value and final xor 0xFFFFFFFF), and
   `crc` continues a previous result, so kp_crc32c(kp_crc32c(0, a), b) == crc(a || b). */
#ifndef KP_CRC32C_H
#define KP_CRC32C_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "kp_platform.h"   /* KP_HAVE_X86_CRC32 */
#include "kp_endian.h"     /* kp_load_le64 */

#define KP_CRC32C_POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t kp_crc32c_table[8][256];
static int kp_crc32c_table_ready = 0;

static void kp_crc32c_build_table(void) {
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; bit++)
            crc = (crc & 1) ? (crc >> 1) ^ KP_CRC32C_POLY : crc >> 1;
        kp_crc32c_table[0][byte] = crc;
    }
    for (uint32_t byte = 0; byte < 256; byte++) {
        uint32_t crc = kp_crc32c_table[0][byte];
        for (int k = 1; k < 8; k++) {
            crc = kp_crc32c_table[0][crc & 0xFF] ^ (crc >> 8);
            kp_crc32c_table[k][byte] = crc;
        }
    }
    kp_crc32c_table_ready = 1;
}

/* Raw (unconditioned) update, eight bytes per step. */
static uint32_t kp_crc32c_sw_update(uint32_t crc, const unsigned char *p, size_t n) {
    if (!kp_crc32c_table_ready)
        kp_crc32c_build_table();
    while (n && ((uintptr_t)p & 7)) {
        crc = kp_crc32c_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t word = kp_load_le64(p);
        uint32_t lo = (uint32_t)word, hi = (uint32_t)(word >> 32);
        lo ^= crc;
        crc = kp_crc32c_table[7][lo & 0xFF] ^ kp_crc32c_table[6][(lo >> 8) & 0xFF] ^
              kp_crc32c_table[5][(lo >> 16) & 0xFF] ^ kp_crc32c_table[4][lo >> 24] ^
              kp_crc32c_table[3][hi & 0xFF] ^ kp_crc32c_table[2][(hi >> 8) & 0xFF] ^
              kp_crc32c_table[1][(hi >> 16) & 0xFF] ^ kp_crc32c_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = kp_crc32c_table[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

/* ---- joining CRCs of adjacent pieces: arithmetic on polynomials modulo P ---- */

/* a * b modulo P, both in the reflected bit order (bit 31 is x^0). */
static uint32_t kp_crc32c_multiply(uint32_t a, uint32_t b) {
    uint32_t product = 0;
    for (uint32_t bit = 1u << 31; bit; bit >>= 1) {
        if (a & bit)
            product ^= b;
        b = (b & 1) ? (b >> 1) ^ KP_CRC32C_POLY : b >> 1;
    }
    return product;
}

/* x^(8 * bytes) modulo P, by squaring. */
static uint32_t kp_crc32c_shift_factor(size_t bytes) {
    uint32_t result = 1u << 31;      /* x^0 */
    uint32_t square = 1u << 23;      /* x^8: one byte */
    while (bytes) {
        if (bytes & 1)
            result = kp_crc32c_multiply(result, square);
        square = kp_crc32c_multiply(square, square);
        bytes >>= 1;
    }
    return result;
}

/* CRC of A || B from the final CRCs of A and of B (B of `length_b` bytes). */
static uint32_t kp_crc32c_combine(uint32_t crc_a, uint32_t crc_b, size_t length_b) {
    return kp_crc32c_multiply(kp_crc32c_shift_factor(length_b), crc_a) ^ crc_b;
}

#ifdef KP_HAVE_X86_CRC32
#define KP_CRC32C_HAVE_HW 1
#include <nmmintrin.h>

__attribute__((target(KP_X86_CRC32_FEATURES)))
static uint32_t kp_crc32c_hw_update(uint32_t crc, const unsigned char *p, size_t n) {
    uint64_t c = crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    while (n >= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = _mm_crc32_u64(c, word);
        p += 8;
        n -= 8;
    }
    while (n--)
        c = _mm_crc32_u8((uint32_t)c, *p++);
    return (uint32_t)c;
}

/* Three streams over thirds of the input, so the crc32 instructions overlap. */
__attribute__((target(KP_X86_CRC32_FEATURES)))
static uint32_t kp_crc32c_hw(uint32_t crc, const unsigned char *p, size_t n) {
    if (n < 4096)
        return ~kp_crc32c_hw_update(~crc, p, n);
    size_t third = (n / 3) & ~(size_t)7;
    const unsigned char *a = p, *b = p + third, *c = p + 2 * third;
    uint64_t ca = ~crc, cb = 0xFFFFFFFFu, cc = 0xFFFFFFFFu;
    for (size_t i = 0; i < third; i += 8) {
        uint64_t wa, wb, wc;
        memcpy(&wa, a + i, 8);
        memcpy(&wb, b + i, 8);
        memcpy(&wc, c + i, 8);
        ca = _mm_crc32_u64(ca, wa);
        cb = _mm_crc32_u64(cb, wb);
        cc = _mm_crc32_u64(cc, wc);
    }
    size_t rest = n - 3 * third;
    uint32_t crc_c = ~kp_crc32c_hw_update((uint32_t)cc, c + third, rest);
    uint32_t joined = kp_crc32c_combine(~(uint32_t)ca, ~(uint32_t)cb, third);
    return kp_crc32c_combine(joined, crc_c, third + rest);
}

/* ---- folding with carry-less multiplication (AVX-512 VPCLMULQDQ) ----

   Bytes read first are the high-degree end of the message polynomial M, so a
   128-bit block loaded little-endian holds, in its low 64 bits, the part H of
   degree 64..127 and in its high 64 bits the part L of degree 0..63 (each bit
   reflected: bit i of a 64-bit half is x^(63-i)). Moving a block forward by D
   bits multiplies it by x^D, and modulo P:

       X * x^D  =  H * (x^(D+64) mod P)  +  L * (x^D mod P)

   both products fit 128 bits. Read as a reflected 128-bit value, the carry-less
   product of two reflected 64-bit values is x * a * b, so each constant is
   x^(D-1) rather than x^D. M keeps its CRC when a block is replaced by its
   fold (same remainder, same distance to the end), so after folding everything
   into one 128-bit block the crc32 instruction over its 16 bytes finishes it. */
#define KP_CRC32C_HAVE_VPCLMUL 1
#include <immintrin.h>

/* x^(bits - 1) mod P in the high half of a 64-bit clmul operand (bit 32 + i is x^(31 - i)). */
static uint64_t kp_crc32c_fold_constant(size_t bits) {
    uint32_t result = 1u << 31, square = 1u << 30;   /* x^0, x^1 */
    for (size_t e = bits - 1; e; e >>= 1) {
        if (e & 1)
            result = kp_crc32c_multiply(result, square);
        square = kp_crc32c_multiply(square, square);
    }
    return (uint64_t)result << 32;
}

/* Folding constants for distances 2048, 512, 384, 256, 128 bits: {x^(D+64), x^D}. */
static uint64_t kp_crc32c_fold[5][2];

static void kp_crc32c_fold_init(void) {
    static const size_t distance[5] = {2048, 512, 384, 256, 128};
    for (int k = 0; k < 5; k++) {
        kp_crc32c_fold[k][0] = kp_crc32c_fold_constant(distance[k] + 64);
        kp_crc32c_fold[k][1] = kp_crc32c_fold_constant(distance[k]);
    }
}

#define KP_FOLD_TARGET __attribute__((target("avx512f,avx512vl,vpclmulqdq,pclmul," KP_X86_CRC32_FEATURES)))

KP_FOLD_TARGET static inline __m128i kp_fold128(__m128i x, __m128i k, __m128i next) {
    return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)),
                         next);
}

KP_FOLD_TARGET static inline __m512i kp_fold512(__m512i x, __m512i k, __m512i next) {
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11),
                                     next, 0x96);   /* a ^ b ^ c */
}

/* n >= 256. */
KP_FOLD_TARGET static uint32_t kp_crc32c_vpclmul(uint32_t crc, const unsigned char *p, size_t n) {
    const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)kp_crc32c_fold[0][1],
                                                                (long long)kp_crc32c_fold[0][0]));
    const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x((long long)kp_crc32c_fold[1][1],
                                                               (long long)kp_crc32c_fold[1][0]));
    /* the initial value goes into the first four bytes (CRC(c, M) = CRC(0, M ^ c)) */
    __m512i a0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)~crc)));
    __m512i a1 = _mm512_loadu_si512(p + 64);
    __m512i a2 = _mm512_loadu_si512(p + 128);
    __m512i a3 = _mm512_loadu_si512(p + 192);
    p += 256;
    n -= 256;
    while (n >= 256) {
        a0 = kp_fold512(a0, k2048, _mm512_loadu_si512(p));
        a1 = kp_fold512(a1, k2048, _mm512_loadu_si512(p + 64));
        a2 = kp_fold512(a2, k2048, _mm512_loadu_si512(p + 128));
        a3 = kp_fold512(a3, k2048, _mm512_loadu_si512(p + 192));
        p += 256;
        n -= 256;
    }
    /* four accumulators into one, then its four 128-bit lanes into one */
    a1 = kp_fold512(a0, k512, a1);
    a2 = kp_fold512(a1, k512, a2);
    a3 = kp_fold512(a2, k512, a3);
    __m128i x = _mm512_extracti32x4_epi32(a3, 0);
    const __m128i k128 = _mm_set_epi64x((long long)kp_crc32c_fold[4][1], (long long)kp_crc32c_fold[4][0]);
    x = kp_fold128(x, k128, _mm512_extracti32x4_epi32(a3, 1));
    x = kp_fold128(x, k128, _mm512_extracti32x4_epi32(a3, 2));
    x = kp_fold128(x, k128, _mm512_extracti32x4_epi32(a3, 3));
    while (n >= 16) {
        x = kp_fold128(x, k128, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
    uint64_t c = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(x));
    c = _mm_crc32_u64(c, (uint64_t)_mm_extract_epi64(x, 1));
    return ~kp_crc32c_hw_update((uint32_t)c, p, n);
}

static int kp_crc32c_hw_state = -1; /* -1 unknown, 0 no, 1 crc32 instruction, 2 and VPCLMULQDQ */
#endif

/* CRC-32C of p[0:n], continuing `crc` (0 to start). */
static uint32_t kp_crc32c(uint32_t crc, const unsigned char *p, size_t n) {
#ifdef KP_CRC32C_HAVE_HW
    if (kp_crc32c_hw_state < 0) {
        __builtin_cpu_init();
        kp_crc32c_hw_state = !__builtin_cpu_supports("sse4.2") ? 0
            : __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl")
              && __builtin_cpu_supports("vpclmulqdq") && __builtin_cpu_supports("pclmul") ? 2 : 1;
        if (kp_crc32c_hw_state == 2)
            kp_crc32c_fold_init();
    }
    if (kp_crc32c_hw_state == 2 && n >= 1024)
        return kp_crc32c_vpclmul(crc, p, n);
    if (kp_crc32c_hw_state)
        return kp_crc32c_hw(crc, p, n);
#endif
    return ~kp_crc32c_sw_update(~crc, p, n);
}

/* The portable path, exposed so tests can check it on machines with SSE4.2 too. */
static uint32_t kp_crc32c_portable(uint32_t crc, const unsigned char *p, size_t n) {
    return ~kp_crc32c_sw_update(~crc, p, n);
}
#endif
