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

/* Frame n at pos: its size (at least min_size, whole in the buffer) and the first
 * four header fields stored in row n; the size, or -1 when the frame does not fit. */
static inline int32_t frame_header(const unsigned char *buf, int64_t length, int64_t pos, int32_t min_size,
                                   int64_t n, int64_t *offset, int32_t *size, int16_t *api_key,
                                   int16_t *api_version, int32_t *correlation_id) {
    int32_t s = (int32_t)be32(buf + pos);
    if (s < min_size || s > length - pos - 4)
        return -1;
    const unsigned char *p = buf + pos + 4;
    offset[n] = pos;
    size[n] = s;
    api_key[n] = (int16_t)be16(p);
    api_version[n] = (int16_t)be16(p + 2);
    correlation_id[n] = (int32_t)be32(p + 4);
    return s;
}

/* Returns the number of frames read (at most capacity). */
int64_t header_loop(const unsigned char *buf, int64_t length, int64_t capacity,
                    int64_t *offset, int32_t *size, int16_t *api_key, int16_t *api_version,
                    int32_t *correlation_id, int16_t *client_id_length) {
    int64_t pos = 0, n = 0;
    while (length - pos >= 12 && n < capacity) {
        int32_t s = frame_header(buf, length, pos, 8, n, offset, size, api_key, api_version, correlation_id);
        if (s < 0)
            break;
        client_id_length[n] = s >= 10 ? (int16_t)be16(buf + pos + 12) : -1;
        pos += 4 + (int64_t)s;
        n++;
    }
    return n;
}


/* ---------------------------------------------------------------- ids through a table
 * The same loop, each frame's client id turned into its dictionary index by a lookup
 * in an open-addressing table that already holds every id of the buffer
 * (id_table_fill, untimed): nothing added, nothing checked, no UTF-8, no growth. It
 * is what any hash-table dictionary costs a frame at the least, so kproto against it
 * shows what kproto's own machinery adds, apart from what the table's memory costs
 * on the machine.
 *
 * A slot is four words: the id's first 24 bytes as on the wire (its int16 length and
 * text, bytes past the id zero) and its index; free slots have word 0 all ones. Ids
 * over 22 bytes are not in these benchmarks' buffers (id_table_fill returns -1).
 * The lookup is made ID_AHEAD frames after its frame is read, its slot prefetched
 * when read, as kproto's header loop does past 2,048 ids. */
#include <string.h>

#define ID_AHEAD 32
#define FREE_WORD (~(uint64_t)0)

static inline uint64_t load_le64(const unsigned char *p) {
    uint64_t x;
    memcpy(&x, p, 8);
    return x;   /* the benchmark machines are little-endian */
}

/* KEY_MASK[n][k]: the bytes of key word k that are among the key's first n bytes
 * (made by id_table_fill, which every table is filled by before its lookups). */
static uint64_t KEY_MASK[25][3];

static void key_masks_init(void) {
    for (int n = 0; n <= 24; n++)
        for (int k = 0; k < 3; k++) {
            int bytes = n - 8 * k < 0 ? 0 : (n - 8 * k > 8 ? 8 : n - 8 * k);
            KEY_MASK[n][k] = bytes == 8 ? ~(uint64_t)0 : (((uint64_t)1 << (8 * bytes)) - 1);
        }
}

/* The key words of the id whose length prefix is at q: three loads masked to the key's
 * 2 + length bytes (at most 24) when the 24 bytes at q are in the buffer (end is its
 * end), else the key copied into zeroed bytes. */
static inline void id_words(const unsigned char *q, const unsigned char *end, uint64_t *w) {
    int n = 2 + (be16(q) > 22 ? 22 : be16(q));   /* longer ids: not in these buffers (see id_table_fill) */
    if (end - q >= 24) {
        w[0] = load_le64(q) & KEY_MASK[n][0];
        w[1] = load_le64(q + 8) & KEY_MASK[n][1];
        w[2] = load_le64(q + 16) & KEY_MASK[n][2];
    } else {
        unsigned char key[24] = {0};
        memcpy(key, q, (size_t)n);
        w[0] = load_le64(key);
        w[1] = load_le64(key + 8);
        w[2] = load_le64(key + 16);
    }
}

static inline uint64_t id_slot(const uint64_t *w, int shift) {
    return ((w[0] * 0x9E3779B97F4A7C15ULL) ^ (w[1] * 0xBF58476D1CE4E5B9ULL) ^ (w[2] + (w[2] >> 29)))
           * 0x94D049BB133111EBULL >> shift;
}

/* Put every distinct id of the buffer in slots (2**(64 - shift) of them, word 0 of
 * each all ones), indexes in order of first appearance: the count, or -1 when an id
 * is over 22 bytes or the table is over three quarters full. (bench_batch sizes it
 * as kproto's is sized, at most half full; denser tables are for experiments.) */
int64_t id_table_fill(const unsigned char *buf, int64_t length, uint64_t *slots, int shift) {
    uint64_t mask = (~(uint64_t)0) >> shift, w[3], j;
    int64_t pos = 0, count = 0;
    key_masks_init();
    while (length - pos >= 12) {
        int32_t s = (int32_t)be32(buf + pos);
        const unsigned char *q = buf + pos + 12;
        pos += 4 + (int64_t)s;
        if (be16(q) == 0xFFFF)
            continue;
        if (be16(q) > 22)
            return -1;
        id_words(q, buf + length, w);
        for (j = id_slot(w, shift); slots[4 * j] != FREE_WORD; j = (j + 1) & mask)
            if (slots[4 * j] == w[0] && slots[4 * j + 1] == w[1] && slots[4 * j + 2] == w[2])
                break;
        if (slots[4 * j] == FREE_WORD) {
            if (4 * (uint64_t)(count + 1) > 3 * (mask + 1))
                return -1;
            slots[4 * j] = w[0];
            slots[4 * j + 1] = w[1];
            slots[4 * j + 2] = w[2];
            slots[4 * j + 3] = (uint64_t)count++;
        }
    }
    return count;
}

static inline int32_t id_find(const uint64_t *slots, uint64_t mask, uint64_t j, const uint64_t *w) {
    for (;; j = (j + 1) & mask) {
        const uint64_t *s = slots + 4 * j;
        if (s[0] == w[0] && s[1] == w[1] && s[2] == w[2])
            return (int32_t)s[3];
        if (s[0] == FREE_WORD)
            return -1;
    }
}

/* header_loop with client_id[n] the id's index (-1: null) instead of its length. */
int64_t header_loop_ids(const unsigned char *buf, int64_t length, int64_t capacity,
                        int64_t *offset, int32_t *size, int16_t *api_key, int16_t *api_version,
                        int32_t *correlation_id, int32_t *client_id, const uint64_t *slots, int shift) {
    uint64_t mask = (~(uint64_t)0) >> shift;
    uint64_t ring_words[ID_AHEAD][3], ring_slot[ID_AHEAD];
    int64_t ring_row[ID_AHEAD];
    int64_t pos = 0, n = 0, pushed = 0, resolved = 0;
    while (length - pos >= 12 && n < capacity) {
        int32_t s = frame_header(buf, length, pos, 10, n, offset, size, api_key, api_version, correlation_id);
        if (s < 0)
            break;
        const unsigned char *p = buf + pos + 4;
        if (be16(p + 8) == 0xFFFF) {
            client_id[n] = -1;
        } else {
            int k = (int)((uint64_t)pushed % ID_AHEAD);
            id_words(p + 8, buf + length, ring_words[k]);
            ring_slot[k] = id_slot(ring_words[k], shift);
            __builtin_prefetch(slots + 4 * ring_slot[k]);
            ring_row[k] = n;
            if (++pushed - resolved == ID_AHEAD) {
                k = (int)((uint64_t)resolved++ % ID_AHEAD);
                client_id[ring_row[k]] = id_find(slots, mask, ring_slot[k], ring_words[k]);
            }
        }
        pos += 4 + (int64_t)s;
        n++;
    }
    for (; resolved < pushed; resolved++) {
        int k = (int)((uint64_t)resolved % ID_AHEAD);
        client_id[ring_row[k]] = id_find(slots, mask, ring_slot[k], ring_words[k]);
    }
    return n;
}
