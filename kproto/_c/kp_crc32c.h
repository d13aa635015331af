/* CRC-32C (Castagnoli), the checksum of Kafka record batches (magic 2).

   Two implementations with one entry point, kp_crc32c():
   - x86-64 with SSE4.2: the crc32 instruction, run as three independent streams
     over thirds of the input (the instruction has a latency of 3 cycles and a
     throughput of 1), whose results are then joined with crc_combine;
   - everywhere else: slice-by-8 tables, built on first use.
   Both compute the standard CRC (initial value and final xor 0xFFFFFFFF), and
   `crc` continues a previous result, so kp_crc32c(kp_crc32c(0, a), b) == crc(a || b). */
#ifndef KP_CRC32C_H
#define KP_CRC32C_H
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        lo = __builtin_bswap32(lo);
        hi = __builtin_bswap32(hi);
#endif
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

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KP_CRC32C_HAVE_HW 1
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
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
__attribute__((target("sse4.2")))
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

static int kp_crc32c_hw_state = -1; /* -1 unknown, 0 no, 1 yes */
#endif

/* CRC-32C of p[0:n], continuing `crc` (0 to start). */
static uint32_t kp_crc32c(uint32_t crc, const unsigned char *p, size_t n) {
#ifdef KP_CRC32C_HAVE_HW
    if (kp_crc32c_hw_state < 0) {
        __builtin_cpu_init();
        kp_crc32c_hw_state = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    }
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
