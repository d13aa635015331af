# Part of _batch.pyx (included there; one module split by responsibility).
# The client-id dictionary: a seeded open-addressing table of every distinct id of a call,
# caches in front of it while there are up to 2,048 ids, and the header loop's way of
# looking ids up a fixed number of ids ahead (a ring) when there are many.

# ------------------------------------------------------------------ client id dictionary
# Every distinct client id of a call lives in one open-addressing hash table that is
# also the dictionary column: an id's slot holds its dictionary index (order of first
# appearance). It is not a cache: the header loop's fast path adds new ids to it
# itself, however many there are. The table grows four times over when five eighths
# full (two doublings at once: a third of the ids placed again that doubling would
# place; and a denser table than at half load, which keeps 10,000 ids in 512 KiB of
# slots, not 2 MiB), so its size follows the distinct ids: at most 205 bytes of
# slots an id (1.6 to 6.4 slots of 32 bytes), plus the id's text and 8-byte offset
# copied as it is added, which is the output's dictionary itself: memory grows with
# the ids the dictionary holds, not beyond.
#
# The key is the id as on the wire, its int16 length and its text. Its first 24
# bytes are kept in the slot as three words, bytes past the id zero: the header loop
# checks an id of up to 22 bytes (and the empty tag byte after it) with three masked
# word loads and compares, touching nothing but its slot. Longer ids also compare the
# rest of their bytes, with the table's copy of the id's text.
#
# Slots are picked by the top bits of a multiplicative hash of every byte of the key,
# keyed by seeds drawn per process at import: without the seeds, the bytes of a
# capture cannot be chosen to pile ids onto one probe run.
cdef enum:
    ID_FIRST_SLOTS = 256   # a power of two: 8 KiB of slots, grown from there
    ID_FIRST_SHIFT = 56    # 64 - log2(ID_FIRST_SLOTS)
    ID_GROWTH_BITS = 2     # the table grows 2 ** ID_GROWTH_BITS times over
    ID_GROW_AHEAD = 16     # slots read ahead of their placing when the table grows
    ID_FIRST_TEXT = 1024   # bytes of id text first allocated
    ID_WORD_BYTES = 24     # key bytes kept in a slot: the length and 22 bytes of text
    ID_SLOT_TEXT = 22

# A free slot's word0: impossible in a key, whose byte 0 is the high byte of a length <= 0x7FFF.
cdef uint64_t ID_FREE = ~(<uint64_t>0)

cdef struct IdSlot:
    uint64_t word0         # bytes 0-7 of "length + text" (little-endian), bytes past the id zero
    uint64_t word1         # bytes 8-15
    uint64_t word2         # bytes 16-23
    int32_t index          # the id's dictionary index
    uint32_t hash_high     # the top 32 bits of the key's hash: growth places it without hashing again

# A slot of the id caches (see "the id caches" below).
cdef struct CacheSlot:
    uint64_t word0        # the key's words, as in IdSlot (ID_FREE: empty)
    uint64_t word1
    uint64_t word2
    int32_t index


cdef struct IdTable:
    IdSlot *slots
    uint64_t mask          # slot count - 1
    int shift              # 64 - log2(slot count): a hash's top bits pick its slot
    Py_ssize_t count       # distinct ids = dictionary length
    Py_ssize_t capacity    # ids text_offsets has room for
    # The dictionary column as it will be handed over (Arrow string offsets and data):
    # each id's text copied when the id is added, its bytes in the cache then (read
    # at the end, from a capture larger than the cache, they were a trip to memory
    # an id). Id k is text[text_offsets[k] .. text_offsets[k + 1]).
    int64_t *text_offsets          # capacity + 1 of them
    char *text
    Py_ssize_t text_size
    Py_ssize_t text_capacity
    size_t text_mapped     # 0: text is malloc'd; else a column map of that many bytes (ids as text)
    CacheSlot *big_cache  # BIG_CACHE_SLOTS of them, made on first use past 512 ids (see the id caches)
    uint64_t seed0
    uint64_t seed1

# WORD_MASK[n][k]: keep the bytes of word k that are among bytes 0..n-1 of the key (n = 0..24);
# a row's three masks side by side, one cache line for the header loop's loads.
cdef uint64_t WORD_MASK[ID_WORD_BYTES + 1][4]
for _n in range(ID_WORD_BYTES + 1):
    for _k in range(4):
        WORD_MASK[_n][_k] = (1 << (8 * min(max(_n - 8 * _k, 0), 8))) - 1

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


# A hint to start loading a slot's cache line (no effect on what the code computes).
cdef extern from *:
    """
    #if (defined(__GNUC__) || defined(__clang__)) && !defined(KP_FORCE_PORTABLE)
    #define KP_PREFETCH(p) __builtin_prefetch((const void *)(p))
    #else
    #define KP_PREFETCH(p) ((void)(p))
    #endif
    """
    void kp_prefetch "KP_PREFETCH"(const void *p) noexcept nogil


cdef inline uint64_t id_hash_seeded(uint64_t seed0, uint64_t seed1, uint64_t word0, uint64_t word1,
                                    uint64_t word2) noexcept nogil:
    """Hash of a key of at most 24 bytes, from its three words (its slot: the top bits).
    A product of the seeded first two words (the second made odd, so for one word1
    distinct word0 never collide) plus an independent product of the third: a few
    instructions on the header loop's hot path, no chain of multiplies."""
    return (word0 ^ seed0) * (((word1 ^ seed1) << 1) | 1) + (word2 ^ seed0) * ID_K0


cdef inline uint64_t id_hash_words(const IdTable *t, uint64_t word0, uint64_t word1,
                                   uint64_t word2) noexcept nogil:
    return id_hash_seeded(t.seed0, t.seed1, word0, word1, word2)


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


cdef inline const unsigned char *id_text(const IdTable *t, int32_t index) noexcept nogil:
    """The text of the id of dictionary index ``index`` (the table's copy)."""
    return <const unsigned char *>t.text + t.text_offsets[index]


cdef int32_t id_find(const IdTable *t, uint64_t h, uint64_t word0, uint64_t word1, uint64_t word2,
                     const unsigned char *q, int32_t n) noexcept nogil:
    """The dictionary index of the key (q, n, its words and hash), or -1 if absent. For
    a key of at most 22 bytes of text only the words are compared, and q is not read."""
    cdef uint64_t j = h >> t.shift
    cdef const IdSlot *s
    while True:
        s = &t.slots[j]
        if s.word0 == word0 and s.word1 == word1 and s.word2 == word2:
            if n <= ID_SLOT_TEXT or same_bytes(q + ID_WORD_BYTES, id_text(t, s.index) + ID_SLOT_TEXT,
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
            slots[j].hash_high = 0    # read (never used) by the growth's look-ahead
    return slots


cdef int id_table_init(IdTable *t) noexcept nogil:
    t.mask = ID_FIRST_SLOTS - 1
    t.shift = ID_FIRST_SHIFT
    t.count = 0
    t.seed0 = ID_SEED0
    t.seed1 = ID_SEED1
    t.slots = id_slots_new(ID_FIRST_SLOTS)
    t.capacity = 64
    t.text_offsets = <int64_t *>malloc((t.capacity + 1) * sizeof(int64_t))
    t.text_capacity = ID_FIRST_TEXT
    t.text_size = 0
    t.text = <char *>malloc(t.text_capacity)
    t.text_mapped = 0
    t.big_cache = NULL
    if t.slots == NULL or t.text_offsets == NULL or t.text == NULL:
        return -1
    t.text_offsets[0] = 0
    return 0


cdef void id_table_free(IdTable *t) noexcept nogil:
    free(t.slots)
    free(t.text_offsets)
    if t.text_mapped:
        kp_column_free(t.text, t.text_mapped)
    else:
        free(t.text)
    t.text_mapped = 0
    free(t.big_cache)
    t.big_cache = NULL
    t.slots = NULL
    t.text_offsets = NULL
    t.text = NULL


cdef inline void id_place_at(IdTable *t, uint64_t j, const uint64_t *words, int32_t index,
                             uint32_t hash_high) noexcept nogil:
    """Put a key known to be absent in the first free slot of its probe run, which starts at j."""
    while t.slots[j].word0 != ID_FREE:
        j = (j + 1) & t.mask
    t.slots[j].word0 = words[0]
    t.slots[j].word1 = words[1]
    t.slots[j].word2 = words[2]
    t.slots[j].index = index
    t.slots[j].hash_high = hash_high


cdef int id_table_grow(IdTable *t) noexcept nogil:
    """Grow the slots 2 ** ID_GROWTH_BITS times over and place every id again: -1 when
    out of memory (table unchanged). A slot keeps its hash's top 32 bits, which pick
    its new slot (tables of up to 2 ** 32 slots), so no key is hashed or read again;
    the new slots ID_GROW_AHEAD places ahead are prefetched, the table being megabytes."""
    cdef uint64_t old_count = t.mask + 1
    cdef IdSlot *old = t.slots
    cdef IdSlot *slots
    cdef uint64_t j
    cdef uint64_t words[3]
    cdef int shift_high = t.shift - ID_GROWTH_BITS - 32    # a hash's top 32 bits to its slot
    if shift_high < 0:
        return -1
    slots = id_slots_new(old_count << ID_GROWTH_BITS)
    if slots == NULL:
        return -1
    t.slots = slots
    t.mask = (old_count << ID_GROWTH_BITS) - 1
    t.shift -= ID_GROWTH_BITS
    for j in range(old_count):
        if j + ID_GROW_AHEAD < old_count:
            kp_prefetch(&slots[old[j + ID_GROW_AHEAD].hash_high >> shift_high])
        if old[j].word0 != ID_FREE:
            words[0] = old[j].word0
            words[1] = old[j].word1
            words[2] = old[j].word2
            id_place_at(t, old[j].hash_high >> shift_high, words, old[j].index, old[j].hash_high)
    free(old)
    return 0


cdef int id_text_room(IdTable *t, Py_ssize_t text_bytes) noexcept nogil:
    """Room for text_bytes more bytes in text (doubling): 0, or -1 when out of memory."""
    cdef char *text
    cdef Py_ssize_t capacity
    if t.text_size + text_bytes <= t.text_capacity:
        return 0
    capacity = 2 * t.text_capacity
    while t.text_size + text_bytes > capacity:
        capacity *= 2
    if t.text_mapped:
        text = <char *>map_resize(t.text, t.text_mapped, page_round(capacity))
        if text == NULL:
            return -1
        t.text_mapped = page_round(capacity)
    else:
        text = <char *>realloc(t.text, capacity)
        if text == NULL:
            return -1
    t.text = text
    t.text_capacity = capacity
    return 0


cdef int id_reserve(IdTable *t, Py_ssize_t text_bytes) noexcept nogil:
    """Room for one more id of text_bytes bytes in text_offsets, text and the slots
    (the slots at most five eighths full): 0, or -1 when out of memory."""
    cdef int64_t *offsets
    if t.count == t.capacity:
        offsets = <int64_t *>realloc(t.text_offsets, (2 * t.capacity + 1) * sizeof(int64_t))
        if offsets == NULL:
            return -1
        t.text_offsets = offsets
        t.capacity *= 2
    if id_text_room(t, text_bytes) < 0:
        return -1
    if id_slots_full(t.count + 1, t.mask + 1) and id_table_grow(t) < 0:
        return -1
    return 0


# ------------------------------------------------------------------ ids as text
# With client_ids="string" the ids are not looked up at all: each frame's id is
# checked as the dictionary would check it and its text appended to the table's
# text in row order, the row's client_id holding its length (id_text_offsets makes
# the Arrow offsets). No table, so no cost that grows with the number of distinct ids.
cdef int id_text_in_map(IdTable *t, Py_ssize_t frames) noexcept:
    """Ids as text: the text goes in a pooled column map (GIL held), not a malloc block,
    sized for ``frames`` ids of 16 bytes: megabytes of fresh pages would cost a fault
    each, and the map is handed over as the Arrow data buffer without a copy (take_text).
    0, or -1 when out of memory (the table keeps its malloc block)."""
    cdef size_t got
    cdef void *p = pool_map(page_round(<size_t>frames * 16), &got)
    if p == NULL:
        return -1
    free(t.text)
    t.text = <char *>p
    t.text_mapped = got
    t.text_capacity = <Py_ssize_t>got
    return 0


cdef CBuffer take_text(IdTable *t):
    """The ids' text as a buffer over its map (ids as text; GIL held): the table lets go of it."""
    cdef CBuffer owner = take_buffer(t.text, t.text_size, t.text_mapped)
    t.text = NULL
    t.text_mapped = 0
    return owner


cdef int id_append_text(IdTable *t, const unsigned char *text, Py_ssize_t n) noexcept nogil:
    """Append n bytes of id text (already checked): 0, or -1 when out of memory."""
    if id_text_room(t, n) < 0:
        return -1
    memcpy(t.text + t.text_size, text, n)
    t.text_size += n
    return 0


cdef inline int32_t id_text_short(IdTable *t, const unsigned char *q, uint32_t tag,
                                  uint64_t key_bits) noexcept nogil:
    """The header loop's id of up to 22 bytes with its tag byte, as text (q its length
    prefix, 26 bytes readable at q; key_bits its key words or'ed): checked as
    id_new_in_loop checks a new id (UTF-8 validation only when a byte is over 0x7F),
    then 24 bytes from its text copied in one fixed-size
    copy (the bytes past the id are overwritten by the next). Its length, or -1 for
    the general loop (a status to report, or out of memory)."""
    cdef int32_t n = kp_load_be16(q)
    if tag and q[2 + n] != 0:
        return -1
    # Up to 22 bytes of text: both length bytes are below 0x80, so a key with no high bit set is ASCII.
    if key_bits & 0x8080808080808080ULL and not wire_utf8_valid(q + 2, n):
        return -1
    if t.text_size + ID_WORD_BYTES > t.text_capacity and id_text_room(t, ID_WORD_BYTES) < 0:
        return -1
    memcpy(t.text + t.text_size, q + 2, ID_WORD_BYTES)
    t.text_size += n
    return n


cdef int32_t id_text_long(IdTable *t, const unsigned char *q, uint32_t tag) noexcept nogil:
    """id_text_short for an id past 22 bytes (whole in the frame with its tag byte)."""
    cdef int32_t n = kp_load_be16(q)
    if not id_new_in_loop(q, n, tag) or id_append_text(t, q + 2, n) < 0:
        return -1
    return n


cdef inline bint id_slots_full(Py_ssize_t ids, uint64_t slot_count) noexcept nogil:
    """Whether ids in slot_count slots are past the table's load (five eighths): it grows first."""
    return 8 * ids > 5 * <Py_ssize_t>slot_count


def id_table_slots(Py_ssize_t ids):
    """The slot count of the client-id table once it holds ``ids`` distinct ids: for
    benchmarks/bench_batch.py's C lookup loop, which sizes its table as this one."""
    cdef uint64_t slot_count = ID_FIRST_SLOTS
    if ids < 0 or ids > 2147483647:   # dictionary indexes are int32
        raise ValueError(f"ids must be 0 to 2147483647, not {ids}")
    while id_slots_full(ids, slot_count):
        slot_count <<= ID_GROWTH_BITS
    return slot_count


cdef int32_t id_insert(IdTable *t, const unsigned char *q, uint64_t h, const uint64_t *words) noexcept nogil:
    """Add an id known to be absent (q its length prefix in the input; h and words its
    hash and key words): its new dictionary index, or -1 when out of memory. Its text
    is copied: a long id's bytes past the slot's words are compared there."""
    cdef int32_t n = kp_load_be16(q)
    if id_reserve(t, n) < 0:
        return -1
    id_place_at(t, h >> t.shift, words, <int32_t>t.count, <uint32_t>(h >> 32))
    memcpy(t.text + t.text_size, q + 2, n)
    t.text_size += n
    t.count += 1
    t.text_offsets[t.count] = t.text_size
    return <int32_t>(t.count - 1)


cdef int32_t id_add(IdTable *t, const unsigned char *q, int32_t n) noexcept nogil:
    """id_insert for an id given by its length prefix alone (n >= 0 its length)."""
    cdef uint64_t words[3]
    id_key(q, n, words)
    return id_insert(t, q, id_hash(t, q, n, words), words)


# ------------------------------------------------------------------ the id caches
# While the table is small, the header loop checks a direct-mapped cache of the ids met
# last before it: keyed like the table (three words), with a hash of one multiply and
# no probing, so a hit takes fewer instructions than a table lookup. A miss goes to
# the table. Up to 512 ids the cache is 512 slots on the stack; from there to 2,048
# ids it is a 16,384-slot cache on the heap (512 KiB, allocated once a call, when
# the table first holds over 512 ids; if memory runs out the loop does without it),
# which holds such ids with few collisions. Past that the loop looks ids up a ring ahead
# (see "ids in the header loop"): a cache missed by most frames is a load and a branch
# that cannot be predicted ahead of every table lookup. The caches' hash is not
# seeded: input chosen to collide in one costs a table lookup a frame, no more.
cdef enum:
    CACHE_SLOTS = 512     # a power of two: 16 KiB on the stack
    CACHE_SHIFT = 55      # 64 - log2(CACHE_SLOTS)
    BIG_CACHE_SLOTS = 16384     # a power of two
    BIG_CACHE_SHIFT = 50        # 64 - log2(BIG_CACHE_SLOTS)
    # The cache a block of frames is read with, by the distinct ids before it.
    STACK_CACHE_UNTIL_IDS = 512
    BIG_CACHE_UNTIL_IDS = 2048

cdef struct IdCache:
    CacheSlot slot[CACHE_SLOTS]


cdef void id_cache_clear(CacheSlot *slots, Py_ssize_t count) noexcept nogil:
    cdef Py_ssize_t k
    for k in range(count):
        slots[k].word0 = ID_FREE


cdef void id_cache_init(IdCache *cache) noexcept nogil:
    id_cache_clear(cache.slot, CACHE_SLOTS)


cdef CacheSlot *id_big_cache(IdTable *t) noexcept nogil:
    """The table's 16,384-slot cache, made and emptied on first use: NULL when out of memory."""
    if t.big_cache == NULL:
        t.big_cache = <CacheSlot *>malloc(BIG_CACHE_SLOTS * sizeof(CacheSlot))
        if t.big_cache != NULL:
            id_cache_clear(t.big_cache, BIG_CACHE_SLOTS)
    return t.big_cache


cdef inline CacheSlot *cache_slot(CacheSlot *slots, int shift, uint64_t word0, uint64_t word1,
                                  uint64_t word2) noexcept nogil:
    return &slots[((word0 ^ word1 ^ word2) * ID_K0) >> shift]


cdef int32_t cache_miss(IdTable *t, CacheSlot *cached, const unsigned char *q, uint32_t covered,
                        uint32_t tag) noexcept nogil:
    """The header loop's way past a cache miss for an id and tag byte of ``covered`` <= 24
    bytes (q its length prefix; the 24 bytes at q are in the buffer): its index from the
    table, the id added if new (see id_new_short), and cached; -1 for the general loop.
    A call of its own, the words recomputed: the loop's hit path keeps nothing for it."""
    cdef const uint64_t *masks = WORD_MASK[covered]
    cdef uint64_t word0 = kp_load_le64(q) & masks[0]
    cdef uint64_t word1 = kp_load_le64(q + 8) & masks[1]
    cdef uint64_t word2 = kp_load_le64(q + 16) & masks[2]
    cdef uint64_t h = id_hash_words(t, word0, word1, word2)
    cdef int32_t index = id_probe(t.slots, t.mask, t.shift, h, word0, word1, word2)
    if index < 0:
        index = id_new_short(t, q, tag, h, word0, word1, word2)
        if index < 0:
            return -1
    cached.word0 = word0
    cached.word1 = word1
    cached.word2 = word2
    cached.index = index
    return index


# ------------------------------------------------------------------ ids in the header loop
# Past 2,048 ids the header loop looks an id up ID_PIPELINE ids after it reads its
# frame: as it reads a frame it computes the id's slot, asks the CPU to start loading it
# (a prefetch) and puts the id in a ring; then it resolves the ring's oldest id, in the
# same loop, so ids are resolved in frame order. With 100,000s of ids the table is
# megabytes and a slot is a trip to memory; the ring keeps up to ID_PIPELINE of those
# trips in flight at once instead of one after the other. (Blocks of 32 frames read,
# then their ids resolved in a second pass, were 10-30% slower at 100,000 ids.)
cdef enum:
    ID_PIPELINE = 32     # ids read ahead of their lookups (a power of two: a ring)

# The ring of pending ids: entry k holds the frame pushed k-th, modulo ID_PIPELINE.
cdef struct PendingIds:
    uint64_t hash[ID_PIPELINE]      # short ids: the key's hash
    uint64_t word0[ID_PIPELINE]     # short ids: the key's words (masked loads, tag byte included); ID_FREE: a long id
    uint64_t word1[ID_PIPELINE]
    uint64_t word2[ID_PIPELINE]
    const unsigned char *key[ID_PIPELINE]   # the id's length prefix in the input
    Py_ssize_t row[ID_PIPELINE]     # the frame's row


cdef inline int32_t id_probe(const IdSlot *slots, uint64_t mask, int shift, uint64_t h,
                             uint64_t word0, uint64_t word1, uint64_t word2) noexcept nogil:
    """The index of a key of at most 24 bytes (its hash and words), or -1 if absent: the
    header loop's lookup, with the table's fields in the caller's locals."""
    cdef uint64_t j = h >> shift
    while True:
        if slots[j].word0 == word0 and slots[j].word1 == word1 and slots[j].word2 == word2:
            return slots[j].index
        if slots[j].word0 == ID_FREE:
            return -1
        j = (j + 1) & mask


cdef inline bint id_new_in_loop(const unsigned char *q, int32_t n, uint32_t tag) noexcept nogil:
    """Whether the header loop may take an id it has not met (q its length prefix, n its
    length, tag 1 for header v2): its tag byte is 0 and its text UTF-8. Else the frame is
    the general loop's, which reports it."""
    return not (tag and q[2 + n] != 0) and wire_utf8_valid(q + 2, n)


cdef int32_t id_new_short(IdTable *t, const unsigned char *q, uint32_t tag, uint64_t h, uint64_t word0,
                          uint64_t word1, uint64_t word2) noexcept nogil:
    """The header loop's id of at most 24 bytes with its tag byte that the table does not
    hold (q its length prefix; h and the words as probed): added, unless the frame is the
    general loop's (its tag byte is not 0, or the id is not UTF-8: a status to report)
    or memory runs out (the general loop says so). Its index, or -1."""
    cdef int32_t n = kp_load_be16(q)
    cdef uint64_t words[3]
    if not id_new_in_loop(q, n, tag):
        return -1
    # tag byte 0: the masked words are the key's own
    words[0] = word0
    words[1] = word1
    words[2] = word2
    return id_insert(t, q, h, words)


cdef int32_t id_long_in_loop(IdTable *t, const unsigned char *q, uint32_t tag) noexcept nogil:
    """The header loop's id past 24 bytes with its tag byte (whole in the frame): its
    index, the id added if new; -1 as in id_new_short."""
    cdef int32_t n = kp_load_be16(q)
    cdef int32_t index
    if tag and q[2 + n] != 0:
        return -1
    index = id_lookup(t, q, n)
    if index >= 0:
        return index
    if not wire_utf8_valid(q + 2, n):
        return -1
    return id_add(t, q, n)


cdef inline int resolve_id(IdTable *t, const PendingIds *pend, int k, int32_t *client_id,
                           const int8_t *header_version) noexcept nogil:
    """The dictionary index of ring entry k's id into client_id[pend.row[k]], the id
    added if new: 0, or -1 when its frame is the general loop's. Entries are resolved
    in the order they were pushed (frame order), so new ids get their indexes in
    order of first appearance."""
    cdef int32_t index
    cdef uint32_t tag = header_version[pend.row[k]] - 1     # 1: header v2, its tag byte checked for a new id
    if pend.word0[k] != ID_FREE:
        # A slot's key is zero past its id: a match also proves the tag byte 0.
        index = id_probe(t.slots, t.mask, t.shift, pend.hash[k], pend.word0[k], pend.word1[k], pend.word2[k])
        if index < 0:
            index = id_new_short(t, pend.key[k], tag, pend.hash[k], pend.word0[k], pend.word1[k], pend.word2[k])
    else:
        index = id_long_in_loop(t, pend.key[k], tag)
    if index < 0:
        return -1
    client_id[pend.row[k]] = index
    return 0
