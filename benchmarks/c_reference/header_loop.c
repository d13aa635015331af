/* The plain C loop the batch decoder is measured against (benchmarks/bench_batch.py).
 *
 * It walks a buffer of size-prefixed Kafka request frames and stores, per frame,
 * what the header-only batch decode stores: offset, size, api_key, api_version,
 * correlation_id, and the client id's length; it skips the client id and, for
 * header v2, an empty tagged-field section. No validation beyond bounds: this is
 * the floor a decoder that also checks everything is compared with.
 */
#include <stdint.h>
#include <stddef.h>

static inline uint32_t be32(const unsigned char *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}
static inline uint16_t be16(const unsigned char *p) {
    return (uint16_t)((p[0] << 8) | p[1]);
}

/* Returns the number of frames read (at most capacity). */
int64_t header_loop(const unsigned char *buf, int64_t length, int64_t capacity,
                    int64_t *offset, int32_t *size, int16_t *api_key, int16_t *api_version,
                    int32_t *correlation_id, int16_t *client_id_length) {
    int64_t pos = 0, n = 0;
    while (length - pos >= 12 && n < capacity) {
        int32_t s = (int32_t)be32(buf + pos);
        if (s < 8 || s > length - pos - 4)
            break;
        const unsigned char *p = buf + pos + 4;
        offset[n] = pos;
        size[n] = s;
        api_key[n] = (int16_t)be16(p);
        api_version[n] = (int16_t)be16(p + 2);
        correlation_id[n] = (int32_t)be32(p + 4);
        client_id_length[n] = s >= 10 ? (int16_t)be16(p + 8) : -1;
        pos += 4 + (int64_t)s;
        n++;
    }
    return n;
}
