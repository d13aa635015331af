/* Per-frame flag bytes to Arrow bitmaps, for the batch decoder's header pass.

   The header loop writes one byte of flags per frame (cheaper than eight
   read-modify-writes of bits); afterwards bit b of every byte goes to bitmap b,
   one bit per frame, least significant bit first (Arrow's order). With SSE2
   (every x86-64) sixteen frames take one load, and per flag one shift and one
   movemask; elsewhere eight frames take one word and, per flag, a multiply that
   gathers the eight bits into a byte. */
#ifndef KP_FLAGS_H
#define KP_FLAGS_H
#include <stdint.h>
#include <string.h>
#include "kp_endian.h"   /* kp_load_le64: byte k of the word is frame k on any host */

#include "kp_platform.h" /* KP_HAVE_SSE2 */

#ifdef KP_HAVE_SSE2
#include <emmintrin.h>
#define KP_FLAGS_SSE2 1
#endif

/* Eight frames' flags (one word) into one byte of each bitmap. */
static inline void kp_split_word(uint64_t word, int64_t byte, uint8_t **bitmaps) {
    int b;
    for (b = 0; b < 8; b++) {
        uint64_t lanes = (word >> b) & 0x0101010101010101ULL;
        bitmaps[b][byte] = (uint8_t)((lanes * 0x0102040810204080ULL) >> 56);
    }
}

/* Splits n flag bytes into the eight bitmaps ((n + 7) / 8 bytes each; bits past n
   are zero) and returns the AND of all n bytes: bit b set when every frame has flag b. */
static inline uint8_t kp_split_flags(const uint8_t *flags, int64_t n, uint8_t **bitmaps) {
    int64_t j = 0;
    uint64_t every_word = ~(uint64_t)0;   /* the AND of the flag bytes, eight lanes */
    uint8_t tail[8];
#ifdef KP_FLAGS_SSE2
    __m128i every = _mm_set1_epi8((char)0xFF);
    uint64_t halves[2];
    for (; j + 16 <= n; j += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(flags + j));
        uint16_t m;
        every = _mm_and_si128(every, v);
        /* movemask takes bit 7 of each byte: shift flag b there (16-bit lanes, so a
           byte's bits spill only into the low bits of the next byte) */
#define KP_FLAG_BITS(b) \
        m = (uint16_t)_mm_movemask_epi8(_mm_slli_epi16(v, 7 - (b))); memcpy(bitmaps[b] + j / 8, &m, 2);
        KP_FLAG_BITS(0) KP_FLAG_BITS(1) KP_FLAG_BITS(2) KP_FLAG_BITS(3)
        KP_FLAG_BITS(4) KP_FLAG_BITS(5) KP_FLAG_BITS(6)
#undef KP_FLAG_BITS
        m = (uint16_t)_mm_movemask_epi8(v); memcpy(bitmaps[7] + j / 8, &m, 2);
    }
    /* the final fold ANDs every byte of the word, so the halves need no order */
    _mm_storeu_si128((__m128i *)halves, every);
    every_word = halves[0] & halves[1];
#endif
    for (; j + 8 <= n; j += 8) {
        uint64_t word = kp_load_le64(flags + j);
        every_word &= word;
        kp_split_word(word, j / 8, bitmaps);
    }
    if (j < n) {
        memset(tail, 0, 8);
        memcpy(tail, flags + j, (size_t)(n - j));
        kp_split_word(kp_load_le64(tail), j / 8, bitmaps);
        memset(tail + (n - j), 0xFF, (size_t)(8 - (n - j)));   /* absent frames take no part in the AND */
        every_word &= kp_load_le64(tail);
    }
    every_word &= every_word >> 32;
    every_word &= every_word >> 16;
    every_word &= every_word >> 8;
    return (uint8_t)every_word;
}
#endif
