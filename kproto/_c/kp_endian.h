/* Big-endian loads and stores on unaligned memory. memcpy keeps them legal C;
   compilers turn each into one load/store plus a byte swap. */
#ifndef KP_ENDIAN_H
#define KP_ENDIAN_H
#include <stdint.h>
#include <string.h>

#if defined(_MSC_VER)
#include <stdlib.h>
#define KP_BSWAP16 _byteswap_ushort
#define KP_BSWAP32 _byteswap_ulong
#define KP_BSWAP64 _byteswap_uint64
#else
#define KP_BSWAP16 __builtin_bswap16
#define KP_BSWAP32 __builtin_bswap32
#define KP_BSWAP64 __builtin_bswap64
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define KP_BIG_ENDIAN_HOST 1
#else
#define KP_BIG_ENDIAN_HOST 0
#endif

static inline uint16_t kp_load_be16(const unsigned char *p) {
    uint16_t v; memcpy(&v, p, 2);
    return KP_BIG_ENDIAN_HOST ? v : KP_BSWAP16(v);
}
static inline uint32_t kp_load_be32(const unsigned char *p) {
    uint32_t v; memcpy(&v, p, 4);
    return KP_BIG_ENDIAN_HOST ? v : KP_BSWAP32(v);
}
static inline uint64_t kp_load_be64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8);
    return KP_BIG_ENDIAN_HOST ? v : KP_BSWAP64(v);
}
/* Little-endian: byte j of p is bits 8j..8j+7 of the value on any host (for masked word compares). */
static inline uint64_t kp_load_le64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8);
    return KP_BIG_ENDIAN_HOST ? KP_BSWAP64(v) : v;
}
static inline void kp_store_be16(unsigned char *p, uint16_t v) {
    v = KP_BIG_ENDIAN_HOST ? v : KP_BSWAP16(v); memcpy(p, &v, 2);
}
static inline void kp_store_be32(unsigned char *p, uint32_t v) {
    v = KP_BIG_ENDIAN_HOST ? v : KP_BSWAP32(v); memcpy(p, &v, 4);
}
static inline void kp_store_be64(unsigned char *p, uint64_t v) {
    v = KP_BIG_ENDIAN_HOST ? v : KP_BSWAP64(v); memcpy(p, &v, 8);
}
static inline double kp_load_be_double(const unsigned char *p) {
    uint64_t bits = kp_load_be64(p); double d; memcpy(&d, &bits, 8); return d;
}
static inline void kp_store_be_double(unsigned char *p, double d) {
    uint64_t bits; memcpy(&bits, &d, 8); kp_store_be64(p, bits);
}
#endif
