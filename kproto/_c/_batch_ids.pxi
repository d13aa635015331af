# Part of _batch.pyx (included there; one module split by responsibility).
# The client-id dictionary: a seeded open-addressing table of every distinct id of a call,
# with a small direct-mapped cache in front (the header pass's hot lookups).

# ------------------------------------------------------------------ client id dictionary
# Every distinct client id of a call lives in one open-addressing hash table that is
# also the dictionary column: an id's slot holds its dictionary index (order of first
# appearance). It is not a cache: an id leaves the header loop's fast path once, the
# first time it is seen, however many ids there are. The table doubles when half
# full, so its size follows the distinct ids (at most 64 bytes of slots an id).
#
# The key is the id as on the wire, its int16 length and its text. Its first 24
# bytes are kept in the slot as three words, bytes past the id zero: the header loop
# checks an id of up to 22 bytes (and the empty tag byte after it) with three masked
# word loads and compares, touching nothing but its slot. Longer ids also compare the
# rest of their bytes, in the input (which outlives the call).
#
# Slots are picked by the top bits of a multiplicative hash of every byte of the key,
# keyed by seeds drawn per process at import: without the seeds, the bytes of a
# capture cannot be chosen to pile ids onto one probe run.
cdef enum:
    ID_FIRST_SLOTS = 256   # a power of two: 8 KiB of slots, grown from there
    ID_FIRST_SHIFT = 56    # 64 - log2(ID_FIRST_SLOTS)
    ID_WORD_BYTES = 24     # key bytes kept in a slot: the length and 22 bytes of text
    ID_SLOT_TEXT = 22

# A free slot's word0: impossible in a key, whose byte 0 is the high byte of a length <= 0x7FFF.
cdef uint64_t ID_FREE = ~(<uint64_t>0)

cdef struct IdSlot:
    uint64_t word0         # bytes 0-7 of "length + text" (little-endian), bytes past the id zero
    uint64_t word1         # bytes 8-15
    uint64_t word2         # bytes 16-23
    int32_t index          # the id's dictionary index

cdef struct IdTable:
    IdSlot *slots
    uint64_t mask          # slot count - 1
    int shift              # 64 - log2(slot count): a hash's top bits pick its slot
    Py_ssize_t count       # distinct ids = dictionary length
    const unsigned char **order   # each id's key in the input (its length prefix), by index
    Py_ssize_t order_capacity
    uint64_t seed0
    uint64_t seed1

# WORD_MASK[k][n]: keep the bytes of word k that are among bytes 0..n-1 of the key (n = 0..24).
cdef uint64_t WORD_MASK[3][ID_WORD_BYTES + 1]
for _k in range(3):
    for _n in range(ID_WORD_BYTES + 1):
        WORD_MASK[_k][_n] = (1 << (8 * min(max(_n - 8 * _k, 0), 8))) - 1

import os as _os
cdef uint64_t ID_SEED0 = int.from_bytes(_os.urandom(8), "little")
cdef uint64_t ID_SEED1 = int.from_bytes(_os.urandom(8), "little")

# Odd multipliers (golden ratio; splitmix64's): a product's top bits depend on every
# bit of the multiplicand.
cdef extern from *:
    """
    #define KP_ID_K0 0x9E3779B97F4A7C15ULL
    #define KP_ID_K1 0xBF58476D1CE4E5B9ULL
    """
    const uint64_t ID_K0 "KP_ID_K0"
    const uint64_t ID_K1 "KP_ID_K1"


cdef inline uint64_t id_hash_words(const IdTable *t, uint64_t word0, uint64_t word1,
                                   uint64_t word2) noexcept nogil:
    """Hash of a key of at most 24 bytes, from its three words (its slot: the top bits).
    A product of the seeded first two words (the second made odd, so for one word1
    distinct word0 never collide) plus an independent product of the third: a few
    instructions on the header loop's hot path, no chain of multiplies."""
    return (word0 ^ t.seed0) * (((word1 ^ t.seed1) << 1) | 1) + (word2 ^ t.seed0) * ID_K0


cdef uint64_t id_hash_long(const IdTable *t, uint64_t word0, uint64_t word1, uint64_t word2,
                           const unsigned char *q, Py_ssize_t total) noexcept nogil:
    """Hash of a key over 24 bytes (``total`` of them at q): its words, then 8 bytes at
    a time, the last 8 overlapping the ones before (the length in word0 tells them apart)."""
    cdef uint64_t h = id_hash_words(t, word0, word1, word2)
    cdef Py_ssize_t i = ID_WORD_BYTES
    while total - i > 8:
        h = (h ^ (h >> 29) ^ kp_load_le64(q + i) ^ t.seed1) * ID_K1
        i += 8
    return (h ^ (h >> 29) ^ kp_load_le64(q + total - 8) ^ t.seed1) * ID_K1


cdef inline bint same_bytes(const unsigned char *a, const unsigned char *b, Py_ssize_t n) noexcept nogil:
    # Eight bytes at a time beats a call to memcmp, and the last word overlaps the one
    # before it instead of a loop over the leftover bytes (n >= 1: ids over 22 bytes).
    cdef uint64_t x, y
    cdef Py_ssize_t i = 0
    if n >= 8:
        while n - i > 8:
            memcpy(&x, a + i, 8)
            memcpy(&y, b + i, 8)
            if x != y:
                return False
            i += 8
        memcpy(&x, a + n - 8, 8)
        memcpy(&y, b + n - 8, 8)
        return x == y
    return memcmp(a, b, n) == 0


cdef inline void id_key(const unsigned char *q, int32_t n, uint64_t *words) noexcept nogil:
    """The three key words of the id whose length prefix is at q (n >= 0 its length;
    only q[0 .. 2 + n) is read)."""
    cdef unsigned char short_key[ID_WORD_BYTES]
    if n >= ID_SLOT_TEXT:
        words[0] = kp_load_le64(q)
        words[1] = kp_load_le64(q + 8)
        words[2] = kp_load_le64(q + 16)
    else:
        memset(short_key, 0, ID_WORD_BYTES)
        memcpy(short_key, q, 2 + n)
        words[0] = kp_load_le64(short_key)
        words[1] = kp_load_le64(short_key + 8)
        words[2] = kp_load_le64(short_key + 16)


cdef inline uint64_t id_hash(const IdTable *t, const unsigned char *q, int32_t n,
                             const uint64_t *words) noexcept nogil:
    if n > ID_SLOT_TEXT:
        return id_hash_long(t, words[0], words[1], words[2], q, 2 + n)
    return id_hash_words(t, words[0], words[1], words[2])


cdef int32_t id_find(const IdTable *t, uint64_t h, uint64_t word0, uint64_t word1, uint64_t word2,
                     const unsigned char *q, int32_t n) noexcept nogil:
    """The dictionary index of the key (q, n, its words and hash), or -1 if absent. For
    a key of at most 22 bytes of text only the words are compared, and q is not read."""
    cdef uint64_t j = h >> t.shift
    cdef const IdSlot *s
    while True:
        s = &t.slots[j]
        if s.word0 == word0 and s.word1 == word1 and s.word2 == word2:
            if n <= ID_SLOT_TEXT or same_bytes(q + ID_WORD_BYTES, t.order[s.index] + ID_WORD_BYTES,
                                               n - ID_SLOT_TEXT):
                return s.index
        elif s.word0 == ID_FREE:
            return -1
        j = (j + 1) & t.mask


cdef inline int32_t id_lookup(const IdTable *t, const unsigned char *q, int32_t n) noexcept nogil:
    """The dictionary index of the id whose length prefix is at q (n >= 0), or -1."""
    cdef uint64_t words[3]
    id_key(q, n, words)
    return id_find(t, id_hash(t, q, n, words), words[0], words[1], words[2], q, n)


cdef IdSlot *id_slots_new(uint64_t count) noexcept nogil:
    cdef IdSlot *slots = <IdSlot *>malloc(count * sizeof(IdSlot))
    cdef uint64_t j
    if slots != NULL:
        for j in range(count):
            slots[j].word0 = ID_FREE
    return slots


cdef int id_table_init(IdTable *t) noexcept nogil:
    t.mask = ID_FIRST_SLOTS - 1
    t.shift = ID_FIRST_SHIFT
    t.count = 0
    t.seed0 = ID_SEED0
    t.seed1 = ID_SEED1
    t.slots = id_slots_new(ID_FIRST_SLOTS)
    t.order_capacity = 64
    t.order = <const unsigned char **>malloc(t.order_capacity * sizeof(const unsigned char *))
    return 0 if t.slots != NULL and t.order != NULL else -1


cdef void id_table_free(IdTable *t) noexcept nogil:
    free(t.slots)
    free(t.order)
    t.slots = NULL
    t.order = NULL


cdef inline void id_place(IdTable *t, uint64_t h, const uint64_t *words, int32_t index) noexcept nogil:
    """Put a key known to be absent in the first free slot of its probe run."""
    cdef uint64_t j = h >> t.shift
    while t.slots[j].word0 != ID_FREE:
        j = (j + 1) & t.mask
    t.slots[j].word0 = words[0]
    t.slots[j].word1 = words[1]
    t.slots[j].word2 = words[2]
    t.slots[j].index = index


cdef int id_table_grow(IdTable *t) noexcept nogil:
    """Double the slots and place every id again: -1 when out of memory (table unchanged)."""
    cdef uint64_t old_count = t.mask + 1
    cdef IdSlot *old = t.slots
    cdef IdSlot *slots = id_slots_new(2 * old_count)
    cdef uint64_t j
    cdef const unsigned char *q
    cdef uint64_t words[3]
    if slots == NULL:
        return -1
    t.slots = slots
    t.mask = 2 * old_count - 1
    t.shift -= 1
    for j in range(old_count):
        if old[j].word0 != ID_FREE:
            words[0] = old[j].word0
            words[1] = old[j].word1
            words[2] = old[j].word2
            q = t.order[old[j].index]
            id_place(t, id_hash(t, q, kp_load_be16(q), words), words, old[j].index)
    free(old)
    return 0


cdef int32_t id_add(IdTable *t, const unsigned char *q, int32_t n) noexcept nogil:
    """Add an id known to be absent (q its length prefix, n >= 0): its new dictionary
    index, or -1 when out of memory."""
    cdef uint64_t words[3]
    cdef const unsigned char **order
    if t.count == t.order_capacity:
        order = <const unsigned char **>realloc(t.order, 2 * t.order_capacity * sizeof(const unsigned char *))
        if order == NULL:
            return -1
        t.order = order
        t.order_capacity *= 2
    if 2 * (t.count + 1) > <Py_ssize_t>(t.mask + 1) and id_table_grow(t) < 0:
        return -1
    id_key(q, n, words)
    id_place(t, id_hash(t, q, n, words), words, <int32_t>t.count)
    t.order[t.count] = q
    t.count += 1
    return <int32_t>(t.count - 1)


# The ids met last, checked before the table: a direct-mapped
# cache keyed by the first 16 bytes of the id on the wire (its int16 length and up
# to 14 bytes of text), so the header loop compares an id with two word loads,
# two masks and two compares instead of a byte loop. Longer ids also compare
# their remaining bytes, and their last 8 bytes go into the hash (Java clients name
# themselves "consumer-<group>-<n>": the first 14 bytes often agree).
cdef enum:
    CACHE_SLOTS = 256         # a power of two; 32 bytes a slot, on the stack
    CACHE_WORD_BYTES = 16     # bytes the two words cover: the length and 14 bytes of text

cdef struct CacheSlot:
    uint64_t word0         # bytes 0-7 of "length + text", bytes past the id zero
    uint64_t word1         # bytes 8-15
    const unsigned char *tail   # ids over 14 bytes: their bytes after the first 14 (in the input)
    int32_t index          # the id's dictionary index

cdef struct IdCache:
    CacheSlot slot[CACHE_SLOTS]

# CACHE_MASK0[n] / CACHE_MASK1[n]: keep bytes 0..n-1 of the 16 (n = 0..16).
cdef uint64_t CACHE_MASK0[CACHE_WORD_BYTES + 1]
cdef uint64_t CACHE_MASK1[CACHE_WORD_BYTES + 1]
for _n in range(CACHE_WORD_BYTES + 1):
    CACHE_MASK0[_n] = (1 << (8 * min(_n, 8))) - 1
    CACHE_MASK1[_n] = (1 << (8 * max(_n - 8, 0))) - 1


cdef void id_cache_init(IdCache *cache) noexcept nogil:
    cdef int k
    for k in range(CACHE_SLOTS):
        # An impossible key: byte 0 of a real one is the high byte of a length <= 0x7FFF.
        cache.slot[k].word0 = ~(<uint64_t>0)
        cache.slot[k].word1 = 0


cdef inline Py_ssize_t cache_hash(uint64_t word0, uint64_t word1) noexcept nogil:
    return <Py_ssize_t>(((word0 ^ word1) * 0x9E3779B97F4A7C15ULL) >> 56)   # top 8 bits: CACHE_SLOTS


cdef inline CacheSlot *cache_slot(IdCache *cache, const unsigned char *q, int32_t n,
                            uint64_t *word0, uint64_t *word1) noexcept nogil:
    """The slot an id maps to, and its key words. ``q`` is the id's length prefix, n >= 0
    its length; only q[0 .. 2 + n) is read."""
    cdef unsigned char short_id[CACHE_WORD_BYTES]
    cdef uint64_t hashed
    if n >= CACHE_WORD_BYTES - 2:
        word0[0] = kp_load_le64(q)
        word1[0] = kp_load_le64(q + 8)
        hashed = word1[0] ^ (kp_load_le64(q + 2 + n - 8) if n > CACHE_WORD_BYTES - 2 else 0)
    else:
        memset(short_id, 0, CACHE_WORD_BYTES)
        memcpy(short_id, q, 2 + n)
        word0[0] = kp_load_le64(short_id)
        word1[0] = kp_load_le64(short_id + 8)
        hashed = word1[0]
    return &cache.slot[cache_hash(word0[0], hashed)]


cdef inline int32_t cache_lookup(IdCache *cache, const unsigned char *q, int32_t n) noexcept nogil:
    """The dictionary index of a cached id (see cache_slot for q and n), or -1."""
    cdef uint64_t word0, word1
    cdef CacheSlot *s = cache_slot(cache, q, n, &word0, &word1)
    if s.word0 != word0 or s.word1 != word1:
        return -1
    if n > CACHE_WORD_BYTES - 2 and not same_bytes(q + CACHE_WORD_BYTES, s.tail, n - (CACHE_WORD_BYTES - 2)):
        return -1
    return s.index


cdef inline void cache_insert(IdCache *cache, const unsigned char *q, int32_t n, int32_t index) noexcept nogil:
    cdef uint64_t word0, word1
    cdef CacheSlot *s = cache_slot(cache, q, n, &word0, &word1)
    s.word0 = word0
    s.word1 = word1
    s.tail = q + CACHE_WORD_BYTES
    s.index = index


cdef int32_t cache_miss(const IdTable *table, IdCache *cache, const unsigned char *q, int32_t n,
                        uint32_t tag) noexcept nogil:
    """The header loop's way past a cache miss (q: the id's length prefix, whole in the
    frame; tag: 1 when a tag byte follows, which must be 0): the id's index from the
    table, now cached too, or -1 when the id is new or the tag byte is not 0."""
    cdef int32_t index
    if tag and q[2 + n] != 0:
        return -1
    index = id_lookup(table, q, n)
    if index >= 0:
        cache_insert(cache, q, n, index)
    return index
