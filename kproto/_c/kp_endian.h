/* Big-endian loads and stores on unaligned memory. memcpy keeps them legal C;
   compilers turn each into one load/store plus a byte swap. */
#ifndef KP_ENDIAN_H
#define KP_ENDIAN_H
#include <stdint.h>
#include <string.h>

#include "kp_platform.h"   /* KP_HAVE_BSWAP, KP_LITTLE_ENDIAN_HOST / KP_BIG_ENDIAN_HOST */

/* Native order: a memcpy is one load/store; the other order adds a byte swap.
   Order unknown, or no byte-swap builtin: values are assembled byte by byte
   (compilers still turn the pattern into one load and a swap where they can). */
#if defined(KP_BIG_ENDIAN_HOST) && defined(KP_HAVE_BSWAP)
#define KP_FROM_BE16(v) (v)
#define KP_FROM_BE32(v) (v)
#define KP_FROM_BE64(v) (v)
#define KP_FROM_LE64(v) KP_BSWAP64(v)
#define KP_ENDIAN_MEMCPY 1
#elif defined(KP_LITTLE_ENDIAN_HOST) && defined(KP_HAVE_BSWAP)
#define KP_FROM_BE16(v) KP_BSWAP16(v)
#define KP_FROM_BE32(v) KP_BSWAP32(v)
#define KP_FROM_BE64(v) KP_BSWAP64(v)
#define KP_FROM_LE64(v) (v)
#define KP_ENDIAN_MEMCPY 1
#endif

#ifdef KP_ENDIAN_MEMCPY
static inline uint16_t kp_load_be16(const unsigned char *p) {
    uint16_t v; memcpy(&v, p, 2); return (uint16_t)KP_FROM_BE16(v);
}
static inline uint32_t kp_load_be32(const unsigned char *p) {
    uint32_t v; memcpy(&v, p, 4); return KP_FROM_BE32(v);
}
static inline uint64_t kp_load_be64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8); return KP_FROM_BE64(v);
}
/* Little-endian: byte j of p is bits 8j..8j+7 of the value on any host (for masked word compares). */
static inline uint64_t kp_load_le64(const unsigned char *p) {
    uint64_t v; memcpy(&v, p, 8); return KP_FROM_LE64(v);
}
static inline void kp_store_be16(unsigned char *p, uint16_t v) {
    v = (uint16_t)KP_FROM_BE16(v); memcpy(p, &v, 2);
}
static inline void kp_store_be32(unsigned char *p, uint32_t v) {
    v = KP_FROM_BE32(v); memcpy(p, &v, 4);
}
static inline void kp_store_be64(unsigned char *p, uint64_t v) {
    v = KP_FROM_BE64(v); memcpy(p, &v, 8);
}
#else
static inline uint16_t kp_load_be16(const unsigned char *p) {
    return (uint16_t)(((unsigned)p[0] << 8) | p[1]);
}
static inline uint32_t kp_load_be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint64_t kp_load_be64(const unsigned char *p) {
    return ((uint64_t)kp_load_be32(p) << 32) | kp_load_be32(p + 4);
}
static inline uint64_t kp_load_le64(const unsigned char *p) {
    uint64_t v = 0;
    int j;
    for (j = 7; j >= 0; j--)
        v = (v << 8) | p[j];
    return v;
}
static inline void kp_store_be16(unsigned char *p, uint16_t v) {
    p[0] = (unsigned char)(v >> 8); p[1] = (unsigned char)v;
}
static inline void kp_store_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24); p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8); p[3] = (unsigned char)v;
}
static inline void kp_store_be64(unsigned char *p, uint64_t v) {
    kp_store_be32(p, (uint32_t)(v >> 32)); kp_store_be32(p + 4, (uint32_t)v);
}
#endif
/* Little-endian 16/32-bit loads (pcap headers written by a little-endian host): byte by
   byte on every host; compilers turn the pattern into one load where the order allows. */
static inline uint16_t kp_load_le16(const unsigned char *p) {
    return (uint16_t)(((unsigned)p[1] << 8) | p[0]);
}
static inline uint32_t kp_load_le32(const unsigned char *p) {
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}
static inline double kp_load_be_double(const unsigned char *p) {
    uint64_t bits = kp_load_be64(p); double d; memcpy(&d, &bits, 8); return d;
}
static inline void kp_store_be_double(unsigned char *p, double d) {
    uint64_t bits; memcpy(&bits, &d, 8); kp_store_be64(p, bits);
}
#endif
