/* Strict UTF-8 validation with the same rules as CPython's decoder (errors="strict"):
   no overlong forms, no surrogates (U+D800..U+DFFF), nothing above U+10FFFF.
   ASCII runs are checked eight bytes at a time, and a string of at least eight bytes
   whose last eight are ASCII ends with one more such check instead of a byte loop
   (those bytes may overlap ones already checked: all ASCII, they end no sequence).
   Returns 1 when valid. */
#ifndef KP_UTF8_H
#define KP_UTF8_H
#include <stdint.h>
#include <string.h>

static inline int kp_utf8_valid(const unsigned char *p, Py_ssize_t n) {
    const unsigned char *end = p + n;
    uint64_t chunk;
    int tail_checked = n < 8;
    while (p < end) {
        if (end - p >= 8) {
            memcpy(&chunk, p, 8);
            if ((chunk & 0x8080808080808080ULL) == 0) { p += 8; continue; }
        } else if (!tail_checked) {
            tail_checked = 1;
            memcpy(&chunk, end - 8, 8);
            if ((chunk & 0x8080808080808080ULL) == 0) return 1;
        }
        unsigned char c = *p;
        if (c < 0x80) { p++; continue; }
        if (c >= 0xC2 && c <= 0xDF) {
            if (end - p < 2 || (p[1] & 0xC0) != 0x80) return 0;
            p += 2; continue;
        }
        if (c >= 0xE0 && c <= 0xEF) {
            if (end - p < 3) return 0;
            unsigned char c1 = p[1];
            if ((c1 & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
            if (c == 0xE0 && c1 < 0xA0) return 0;          /* overlong */
            if (c == 0xED && c1 > 0x9F) return 0;          /* surrogate */
            p += 3; continue;
        }
        if (c >= 0xF0 && c <= 0xF4) {
            if (end - p < 4) return 0;
            unsigned char c1 = p[1];
            if ((c1 & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
            if (c == 0xF0 && c1 < 0x90) return 0;          /* overlong */
            if (c == 0xF4 && c1 > 0x8F) return 0;          /* above U+10FFFF */
            p += 4; continue;
        }
        return 0;
    }
    return 1;
}
#endif
