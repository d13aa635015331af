# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""The batch decoder's loops in C: frames to column buffers, without a Python object per frame.

Two passes, both without the GIL:

* the **header pass** reads every frame's header into plain C arrays (the
  columns of ``kproto.batch``) and finds each body;
* the **JSON pass** (optional) walks the message codec's compiled plans over each
  body and writes JSON text straight from the bytes: the same shape as
  ``Message.to_dict()``, with no Python object per field.

A bad frame never raises: it gets a status code and an error offset, and the
loop goes on. ``kproto/batch.py`` turns the arrays into Arrow; the pure twin is
``kproto/_py/batch.py``.
"""

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from cpython.ref cimport PyObject, Py_INCREF
from libc.stdint cimport int8_t, int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport malloc, calloc, realloc, free
from libc.string cimport memcmp, memcpy, memset, strlen
from libc.stdio cimport snprintf

# Column memory: mmap/mremap on Linux, malloc/realloc elsewhere (kp_platform.h).
cdef extern from "kp_platform.h" nogil:
    void *kp_zero_map(size_t bytes)
    void *kp_column_resize(void *p, size_t old_bytes, size_t new_bytes)
    void kp_column_free(void *p, size_t bytes)

from kproto._c._wire cimport *
from kproto._c._buffer cimport kp_load_be16, kp_load_be32, kp_load_be64, kp_load_le64, kp_load_be_double
from kproto._c._codec cimport (
    CPlan, FieldOp, native_plan,
    K_BOOL, K_INT8, K_INT16, K_INT32, K_INT64, K_UINT16, K_UINT32, K_FLOAT64, K_UUID,
    K_STRING, K_BYTES, K_RECORDS, K_STRUCT, K_ARRAY,
)

import json as _json

import numpy as np

from kproto import schema
from kproto._common.batch import Status
from kproto.schema import _plain

IMPLEMENTATION = "c"

# Status numbers (ST_*) come from the wire layer, checked there against kproto._common.batch.Status.
from kproto._c._wire import STATUS_NUMBERS

cdef enum:
    MAX_KEY = 256
    MAX_VERSION = 64
    MAX_DEPTH = 64


# ------------------------------------------------------------------ protocol facts as C tables
# Per API key and direction (0 request, 1 response): valid versions, deprecated
# versions (KIP-896) and the lowest version Kafka 4.x defines; -1 where none.
cdef int16_t valid_lo[2][MAX_KEY]
cdef int16_t valid_hi[2][MAX_KEY]
cdef int16_t deprecated_lo[2][MAX_KEY]
cdef int16_t deprecated_hi[2][MAX_KEY]
cdef int16_t min_4x[2][MAX_KEY]


cdef void load_tables():
    cdef int d, key
    for d in range(2):
        for key in range(MAX_KEY):
            valid_lo[d][key] = -1
            valid_hi[d][key] = -2
            deprecated_lo[d][key] = -1
            deprecated_hi[d][key] = -2
            min_4x[d][key] = -1
    for info in schema.MESSAGES.values():
        if info["type"] not in ("request", "response") or info["api_key"] is None:
            continue
        d = 0 if info["type"] == "request" else 1
        key = info["api_key"]
        if not 0 <= key < MAX_KEY:
            continue
        valid_lo[d][key], valid_hi[d][key] = info["valid_versions"]
        # A response shares its request's deprecation (KIP-896 deprecates the exchange).
        for src in (info, schema.MESSAGES.get(schema.request_name(key) or "", info)):
            if src["deprecated_versions"] is not None:
                deprecated_lo[d][key], deprecated_hi[d][key] = src["deprecated_versions"]
                break
        if info["min_version_4x"] is not None:
            min_4x[d][key] = info["min_version_4x"]


# One byte per (direction, api_key, version) for the hot loop: header version and
# the API checks in a single load.
cdef enum:
    I_HEADER_VERSION = 3   # mask: 0, 1 or 2
    I_KNOWN = 4            # the API has a schema
    I_VALID = 8            # ... and this version is one of its valid versions
    I_DEPRECATED = 16
    I_REMOVED = 32

cdef uint8_t info_table[2][MAX_KEY][MAX_VERSION]


cdef uint8_t compute_info(int d, int key, int version) noexcept nogil:
    cdef uint8_t info = <uint8_t>(request_header_version(key, version) if d == 0
                                  else response_header_version(key, version))
    if key < 0 or key >= MAX_KEY or valid_lo[d][key] < 0:
        return info
    info |= I_KNOWN
    if version < valid_lo[d][key] or version > valid_hi[d][key]:
        return info
    info |= I_VALID
    if deprecated_lo[d][key] <= version <= deprecated_hi[d][key]:
        info |= I_DEPRECATED
    if version < min_4x[d][key]:
        info |= I_REMOVED
    return info


cdef inline uint8_t version_info(int d, int key, int version) noexcept nogil:
    if 0 <= key < MAX_KEY and 0 <= version < MAX_VERSION:
        return info_table[d][key][version]
    return compute_info(d, key, version)


cdef void load_info_table():
    cdef int d, key, version
    for d in range(2):
        for key in range(MAX_KEY):
            for version in range(MAX_VERSION):
                info_table[d][key][version] = compute_info(d, key, version)


load_tables()


load_info_table()
assert all(info["valid_versions"][1] < MAX_VERSION for info in schema.MESSAGES.values())


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


# ------------------------------------------------------------------ the header pass
# Which optional values a frame has: one byte per frame while scanning, split into
# Arrow validity bitmaps afterwards (cheaper than eight read-modify-writes per frame).
cdef enum:
    F_API = 1
    F_CORRELATION = 2
    F_HEADER_VERSION = 4
    F_CLIENT_ID = 8
    F_TAG_COUNT = 16
    F_ERROR = 32
    F_DEPRECATED = 64
    F_REMOVED = 128

BITMAP_NAMES = ("has_api", "has_correlation", "has_header_version", "has_client_id",
                "has_tag_count", "has_error", "deprecated", "removed")


# Column pointers, all malloc'd with the same capacity (column_slots walks them as an array).
cdef struct Columns:
    int64_t *offset
    int32_t *size
    int8_t *header_version
    int16_t *api_key
    int16_t *api_version
    int32_t *correlation_id
    int32_t *client_id
    int32_t *tag_count
    uint8_t *status
    int32_t *error_offset
    int32_t *body_offset
    int8_t *direction
    uint8_t *present         # F_* flags per frame


cdef inline void set_bit(Columns *c, Py_ssize_t i, uint8_t flag) noexcept nogil:
    c.present[i] |= flag


cdef inline void clear_row(Columns *c, Py_ssize_t i) noexcept nogil:
    # Every slot gets a value, null or not: no stale heap bytes reach Arrow.
    c.header_version[i] = 0
    c.api_key[i] = 0
    c.api_version[i] = 0
    c.correlation_id[i] = 0
    c.client_id[i] = 0
    c.tag_count[i] = 0
    c.status[i] = ST_OK
    c.error_offset[i] = 0
    c.body_offset[i] = -1
    c.present[i] = 0


cdef inline void fail(Columns *c, Py_ssize_t i, int status, Py_ssize_t where) noexcept nogil:
    c.status[i] = <uint8_t>status
    c.error_offset[i] = <int32_t>where
    set_bit(c, i, F_ERROR)


cdef inline void api_checks(Columns *c, Py_ssize_t i, int d, int key, int version, Py_ssize_t body) noexcept nogil:
    if key < 0 or key >= MAX_KEY or valid_lo[d][key] < 0:
        fail(c, i, ST_UNKNOWN_API, body)
        return
    if version < valid_lo[d][key] or version > valid_hi[d][key]:
        fail(c, i, ST_UNSUPPORTED_VERSION, body)
        return
    if deprecated_lo[d][key] <= version <= deprecated_hi[d][key]:
        set_bit(c, i, F_DEPRECATED)
    if version < min_4x[d][key]:
        set_bit(c, i, F_REMOVED)


cdef int32_t new_client(IdTable *ids, const unsigned char *q, int32_t length) noexcept nogil:
    """Dictionary index of a client id not in the table yet (q: its length prefix):
    -1 not UTF-8, -2 out of memory."""
    cdef int32_t index
    if not wire_utf8_valid(q + 2, length):
        return -1
    index = id_add(ids, q, length)
    return -2 if index < 0 else index


cdef inline void scan_request(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                              IdTable *ids) noexcept nogil:
    # The common path stays small so the compiler inlines it into the loop; the
    # rare ones (errors, new client ids, non-empty tag sections) are calls.
    cdef Py_ssize_t pos = 8
    cdef int key, version, hv, st
    cdef int16_t length
    cdef int32_t index
    cdef uint8_t info
    cdef uint8_t flags = F_API | F_CORRELATION | F_HEADER_VERSION
    if n < 8:
        c.header_version[i] = 0
        c.api_key[i] = 0
        c.api_version[i] = 0
        c.correlation_id[i] = 0
        c.present[i] = 0
        fail(c, i, ST_TRUNCATED, 0 if n < 2 else (2 if n < 4 else 4))
        return
    key = <int16_t>kp_load_be16(p)
    version = <int16_t>kp_load_be16(p + 2)
    info = version_info(0, key, version)
    hv = info & I_HEADER_VERSION
    c.api_key[i] = <int16_t>key
    c.api_version[i] = <int16_t>version
    c.correlation_id[i] = <int32_t>kp_load_be32(p + 4)
    c.header_version[i] = <int8_t>hv
    if hv >= 1:
        if n - pos < 2:
            c.present[i] = flags
            fail(c, i, ST_TRUNCATED, pos)
            return
        length = <int16_t>kp_load_be16(p + pos)
        pos += 2
        if length >= 0:
            if n - pos < length:
                c.present[i] = flags
                fail(c, i, ST_TRUNCATED, pos)
                return
            index = id_lookup(ids, p + pos - 2, length)
            if index < 0:
                index = new_client(ids, p + pos - 2, length)
                if index < 0:
                    c.present[i] = flags
                    fail(c, i, ST_MALFORMED if index == -1 else ST_NO_MEMORY, pos)
                    return
            c.client_id[i] = index
            flags |= F_CLIENT_ID
            pos += length
        elif length != -1:
            c.present[i] = flags
            fail(c, i, ST_BAD_LENGTH, pos)
            return
    if hv >= 2:
        if pos < n and p[pos] == 0:   # no tagged fields: the usual case
            c.tag_count[i] = 0
            pos += 1
        else:
            st = wire_skip_tags(p, n, &pos, &c.tag_count[i])
            if st:
                c.present[i] = flags
                fail(c, i, st, pos)
                return
        flags |= F_TAG_COUNT
    c.body_offset[i] = <int32_t>pos
    if info & I_DEPRECATED:
        flags |= F_DEPRECATED
    if info & I_REMOVED:
        flags |= F_REMOVED
    c.present[i] = flags
    if not info & I_VALID:
        fail(c, i, ST_UNSUPPORTED_VERSION if info & I_KNOWN else ST_UNKNOWN_API, pos)


cdef inline void scan_response(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                               int key, int version) noexcept nogil:
    cdef Py_ssize_t pos = 4
    cdef int hv, st
    if n < 4:
        fail(c, i, ST_TRUNCATED, 0)
        return
    c.correlation_id[i] = <int32_t>kp_load_be32(p)
    set_bit(c, i, F_CORRELATION)
    if key < 0:
        # Without the request's API and version the header's length is unknown.
        fail(c, i, ST_NO_REQUEST_INFO, 4)
        return
    c.api_key[i] = <int16_t>key
    c.api_version[i] = <int16_t>version
    set_bit(c, i, F_API)
    hv = version_info(1, key, version) & I_HEADER_VERSION
    c.header_version[i] = <int8_t>hv
    set_bit(c, i, F_HEADER_VERSION)
    if n == 4:
        # Only a correlation id: what a broker sends for a request it does not support.
        fail(c, i, ST_EMPTY_RESPONSE, 4)
        return
    if hv >= 1:
        st = wire_skip_tags(p, n, &pos, &c.tag_count[i])
        if st:
            fail(c, i, st, pos)
            return
        set_bit(c, i, F_TAG_COUNT)
    c.body_offset[i] = <int32_t>pos
    api_checks(c, i, 1, key, version, pos)


cdef inline void scan_frame(Columns *c, Py_ssize_t i, const unsigned char *p, Py_ssize_t n,
                            int direction, int key, int version, IdTable *ids) noexcept nogil:
    if direction == 1:
        clear_row(c, i)
        scan_response(c, i, p, n, key, version)
    else:
        # Requests are the hot path: scan_request writes the header columns itself on
        # every path, so only the columns it may leave untouched are reset here.
        c.status[i] = ST_OK
        c.error_offset[i] = 0
        c.client_id[i] = 0
        c.tag_count[i] = 0
        c.body_offset[i] = -1
        scan_request(c, i, p, n, ids)


cdef inline void clear_zero_columns_of(Columns *c, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """Rows [start, end) of the columns a plain request leaves zero: tag count, status, error offset, direction."""
    memset(c.tag_count + start, 0, (end - start) * sizeof(int32_t))
    memset(c.status + start, ST_OK, (end - start) * sizeof(uint8_t))
    memset(c.error_offset + start, 0, (end - start) * sizeof(int32_t))
    memset(c.direction + start, 0, (end - start) * sizeof(int8_t))


# What the plain-request loop needs to know of (api_key, api_version), at
# [api_key * MAX_VERSION + api_version]: 0 when it cannot take the frame (unknown
# API, unsupported version, header v0); else the row's flags (F_*) and, in bit 8,
# whether the header is v2 (ends with a tagged-field section).
cdef uint16_t plain_request[MAX_KEY * MAX_VERSION]


cdef void load_plain_request_table():
    cdef int key, version, hv
    cdef uint8_t info
    cdef uint16_t flags
    for key in range(MAX_KEY):
        for version in range(MAX_VERSION):
            info = info_table[0][key][version]
            hv = info & I_HEADER_VERSION
            if not (info & I_VALID) or hv == 0:
                plain_request[key * MAX_VERSION + version] = 0
                continue
            flags = F_API | F_CORRELATION | F_HEADER_VERSION
            if hv == 2:
                flags |= F_TAG_COUNT | 0x100
            if info & I_DEPRECATED:
                flags |= F_DEPRECATED
            if info & I_REMOVED:
                flags |= F_REMOVED
            plain_request[key * MAX_VERSION + version] = flags


load_plain_request_table()


cdef inline void general_row_done(Columns *c, Py_ssize_t i, bint *zeros_written,
                                  Py_ssize_t *zero_from) noexcept nogil:
    """After a row of the general loop in a header-only decode (see scan): the first
    row with a value in the four zero columns makes them real columns."""
    if not zeros_written[0]:
        if c.tag_count[i] == 0 and c.status[i] == ST_OK and c.error_offset[i] == 0 and c.direction[i] == 0:
            return
        zeros_written[0] = True
        clear_zero_columns_of(c, 0, i)   # the plain rows so far (the general ones hold zeros already)
    zero_from[0] = i + 1


cdef inline Py_ssize_t scan_plain_requests(Columns *c, Py_ssize_t i, Py_ssize_t limit,
                                           const unsigned char *buf, Py_ssize_t length, Py_ssize_t *pos_io,
                                           Py_ssize_t max_frame_size, const IdTable *ids, IdCache *cache,
                                           bint body_offsets, bint clear_zero_columns) noexcept nogil:
    """The common case in a loop of its own: size-prefixed requests, whole, of a valid
    API version, with a client id seen before (or null) and no tagged fields.

    Returns the row count at the first frame that is anything else (or at ``limit``,
    or near the end of the buffer); the general loop takes that frame, then comes
    back. The columns that are zero on this path are not written per row: a block
    of rows at a time when ``clear_zero_columns``, else by the caller (see scan).
    Callers pass ``body_offsets`` and ``clear_zero_columns`` as constants, so the
    compiler makes a loop for each case with the test gone.
    """
    cdef Py_ssize_t block_end
    while i < limit:
        block_end = i + 4096 if limit - i > 4096 else limit
        if clear_zero_columns:
            clear_zero_columns_of(c, i, block_end)
        i = scan_plain_block(c, i, block_end, buf, length, pos_io, max_frame_size, ids, cache, body_offsets)
        if i < block_end:
            break
    return i


cdef inline Py_ssize_t scan_plain_block(Columns *c, Py_ssize_t i, Py_ssize_t limit,
                                        const unsigned char *buf, Py_ssize_t length, Py_ssize_t *pos_io,
                                        Py_ssize_t max_frame_size, const IdTable *ids, IdCache *cache,
                                        bint body_offsets) noexcept nogil:
    """Rows [i, limit) of scan_plain_requests, as far as they go. Column pointers
    are copied into locals first: a store through a one-byte column may alias any
    memory the compiler cannot see is private, and it would reload every pointer
    after each such store."""
    cdef int64_t *offset = c.offset
    cdef int32_t *size_col = c.size
    cdef int8_t *header_version = c.header_version
    cdef int16_t *api_key = c.api_key
    cdef int16_t *api_version = c.api_version
    cdef int32_t *correlation_id = c.correlation_id
    cdef int32_t *client_id = c.client_id
    cdef int32_t *body_offset = c.body_offset
    cdef uint8_t *present = c.present
    cdef Py_ssize_t pos = pos_io[0], next_pos, body
    # The loop reads 16 bytes at every frame's client id (p + 8) before it knows the
    # frame is that long: it leaves frames in the last 28 bytes to the general loop.
    cdef Py_ssize_t last_pos = length - (4 + 8 + CACHE_WORD_BYTES)
    cdef const unsigned char *p
    cdef uint32_t size, key_version, plain, tag, id_length, covered
    cdef uint64_t word0, word1
    cdef const CacheSlot *s
    cdef int32_t index
    cdef uint8_t flags
    while i < limit and pos <= last_pos:
        size = kp_load_be32(buf + pos)
        next_pos = pos + 4 + <Py_ssize_t>size
        if size > <uint32_t>max_frame_size or next_pos > length:
            break
        p = buf + pos + 4
        key_version = kp_load_be32(p)             # api_key << 16 | api_version
        if key_version & 0xFF00FFC0U:              # api_key >= 256 or api_version >= 64 (MAX_KEY, MAX_VERSION)
            break
        plain = plain_request[(key_version >> 10) + (key_version & 0x3F)]   # [api_key * 64 + api_version]
        if plain == 0:
            break
        tag = plain >> 8                           # 1: header v2, whose tag section must be the byte 0
        id_length = kp_load_be16(p + 8)
        covered = id_length + 2 + tag              # the length prefix, the id and the tag byte
        if covered <= CACHE_WORD_BYTES:
            # One masked compare checks the id and the tag byte: a cached key is zero
            # past its id, so a hit also proves the tag section empty.
            word0 = kp_load_le64(p + 8) & CACHE_MASK0[covered]
            word1 = kp_load_le64(p + 16) & CACHE_MASK1[covered]
            s = &cache.slot[cache_hash(word0, word1)]
            if (word0 ^ s.word0) | (word1 ^ s.word1):
                # Not the id met last in this slot: the table knows every id seen
                # (-1: a new id, or a tag byte that is not 0; the general loop's).
                index = cache_miss(ids, cache, p + 8, <int32_t>id_length, tag)
                if index < 0:
                    break
            else:
                index = s.index
            body = 10 + id_length + tag
            flags = <uint8_t>plain | F_CLIENT_ID
        elif id_length == 0xFFFF:                  # a null client id (p[10] is in the buffer)
            body = 10 + tag
            if tag and p[10] != 0:
                break
            index = 0
            flags = <uint8_t>plain
        elif id_length <= 0x7FFF:                  # a long id: its bytes are read only once known whole
            body = 10 + id_length + tag
            if body > <Py_ssize_t>size:
                break
            index = cache_lookup(cache, p + 8, <int32_t>id_length)
            if index < 0:
                index = cache_miss(ids, cache, p + 8, <int32_t>id_length, tag)
            if index < 0 or (tag and p[10 + id_length] != 0):
                break
            flags = <uint8_t>plain | F_CLIENT_ID
        else:
            break
        if body > <Py_ssize_t>size:
            break
        offset[i] = pos
        size_col[i] = <int32_t>size
        header_version[i] = <int8_t>(1 + tag)
        api_key[i] = <int16_t>(key_version >> 16)
        api_version[i] = <int16_t>key_version
        correlation_id[i] = <int32_t>kp_load_be32(p + 4)
        client_id[i] = index
        if body_offsets:
            body_offset[i] = <int32_t>body
        present[i] = flags
        pos = next_pos
        i += 1
    pos_io[0] = pos
    return i


# ------------------------------------------------------------------ column memory
cdef class CBuffer:
    """Column memory owned by a Python object and exported with the buffer protocol.

    On Linux columns are anonymous memory maps asking for huge pages: a million
    frames write tens of megabytes of fresh columns, and 4 KiB page faults would
    cost more than decoding. They grow and shrink by remapping (pages move, bytes
    are not copied). Elsewhere they are malloc/realloc blocks (kp_platform.h).
    Either way they go to numpy / Arrow without a copy.
    """
    cdef char *data
    cdef Py_ssize_t length
    cdef size_t mapped         # 0: not owned (the shared zeros)
    cdef Py_ssize_t shape[1]

    def __dealloc__(self):
        if self.data != NULL and self.mapped:
            pool_put(self.data, self.mapped)

    def __getbuffer__(self, Py_buffer *view, int flags):
        if not self.mapped and flags & PyBUF_WRITABLE:
            raise BufferError("a column of shared zeros is read-only")
        self.shape[0] = self.length
        view.buf = self.data
        view.obj = self
        view.len = self.length
        view.readonly = 0 if self.mapped else 1
        view.itemsize = 1
        view.format = "B"
        view.ndim = 1
        view.shape = self.shape
        view.strides = NULL
        view.suboffsets = NULL
        view.internal = NULL

    def __releasebuffer__(self, Py_buffer *view):
        pass

    def __len__(self):
        return self.length


# One read-only anonymous map, never written: every page of it is the kernel's zero
# page, so columns that are all zero cost neither memory nor writes. Address space
# only; kept for the life of the process (arrays may point into it).
cdef size_t ZERO_MAP_BYTES = (<size_t>1) << 30
cdef void *zero_map_ptr = NULL


cdef void *zero_map() noexcept:
    global zero_map_ptr
    cdef void *p
    if zero_map_ptr == NULL:
        p = kp_zero_map(ZERO_MAP_BYTES)
        if p != NULL:
            zero_map_ptr = p
    return zero_map_ptr


cdef CBuffer take_zeros(Py_ssize_t length):
    cdef CBuffer b = CBuffer.__new__(CBuffer)
    b.data = <char *>zero_map_ptr
    b.length = length
    b.mapped = 0
    return b


cdef CBuffer take_buffer(void *data, Py_ssize_t length, size_t mapped):
    cdef CBuffer b = CBuffer.__new__(CBuffer)
    b.data = <char *>data
    b.length = length
    b.mapped = mapped
    return b


cdef inline size_t page_round(size_t n) noexcept nogil:
    return (n + 4095) & ~(<size_t>4095) if n else 4096


# Freed column maps are kept for the next call (up to a bound): fresh pages cost a
# fault and a kernel zeroing each, and that would be most of a header-only decode.
# The pool is touched only with the GIL held (allocation before the loop, and
# CBuffer deallocation).
cdef enum:
    POOL_SLOTS = 64
cdef size_t POOL_MAX_BYTES = (<size_t>256) << 20
cdef void *pool_ptr[POOL_SLOTS]
cdef size_t pool_size[POOL_SLOTS]
cdef size_t pool_total = 0
memset(pool_ptr, 0, sizeof(pool_ptr))
memset(pool_size, 0, sizeof(pool_size))


cdef void pool_put(void *p, size_t size) noexcept:
    global pool_total
    cdef int k
    if pool_total + size <= POOL_MAX_BYTES:
        for k in range(POOL_SLOTS):
            if pool_ptr[k] == NULL:
                pool_ptr[k] = p
                pool_size[k] = size
                pool_total += size
                return
    kp_column_free(p, size)


cdef void *pool_take(size_t want, size_t *got) noexcept:
    """A pooled map of at least ``want`` bytes (or the largest one, to be grown); NULL if none."""
    global pool_total
    cdef int k, best = -1
    cdef void *p
    for k in range(POOL_SLOTS):
        if pool_ptr[k] == NULL:
            continue
        if best < 0:
            best = k
        elif pool_size[best] < want:
            if pool_size[k] > pool_size[best]:
                best = k
        elif want <= pool_size[k] < pool_size[best]:
            best = k
    if best < 0:
        return NULL
    p = pool_ptr[best]
    got[0] = pool_size[best]
    pool_ptr[best] = NULL
    pool_total -= pool_size[best]
    return p


cdef int columns_from_pool(Columns *c, size_t *mapped, Py_ssize_t capacity) noexcept:
    """Start the columns from pooled maps where there are some (GIL held)."""
    cdef void **slots = column_slots(c)
    cdef int k
    cdef size_t got
    cdef void *p
    for k in range(NCOLUMNS):
        if slots[k] == NULL:
            p = pool_take(page_round(capacity * ELEMENT_SIZE[k]), &got)
            if p != NULL:
                slots[k] = p
                mapped[k] = got
    return 0


cdef void *map_resize(void *p, size_t old_bytes, size_t new_bytes) noexcept nogil:
    """Map (p NULL) or remap a column to new_bytes (page-rounded); NULL when out of memory."""
    return kp_column_resize(p, old_bytes, new_bytes)


cdef enum:
    NCOLUMNS = 13

# Element size of each column, in the order of the Columns struct's pointers.
cdef Py_ssize_t ELEMENT_SIZE[NCOLUMNS]
ELEMENT_SIZE[:] = [8, 4, 1, 2, 2, 4, 4, 4, 1, 4, 4, 1, 1]
# The columns a plain request leaves zero (see clear_zero_columns_of).
cdef bint ZERO_COLUMN[NCOLUMNS]
ZERO_COLUMN[:] = [0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 1, 0]
COLUMN_NAMES = ("offset", "size", "header_version", "api_key", "api_version", "correlation_id",
                "client_id", "tag_count", "status", "error_offset", "body_offset", "direction",
                "present")
COLUMN_TYPES = (np.int64, np.int32, np.int8, np.int16, np.int16, np.int32, np.int32, np.int32,
                np.uint8, np.int32, np.int32, np.int8, np.uint8)


cdef inline void **column_slots(Columns *c) noexcept nogil:
    return <void **>c


cdef int columns_resize(Columns *c, size_t *mapped, Py_ssize_t capacity) noexcept nogil:
    """Map or remap every column to hold ``capacity`` frames; -1 when out of memory."""
    cdef void **slots = column_slots(c)
    cdef void *p
    cdef size_t want
    cdef int k
    for k in range(NCOLUMNS):
        want = page_round(capacity * ELEMENT_SIZE[k])
        p = map_resize(slots[k], mapped[k], want)
        if p == NULL:
            return -1
        slots[k] = p
        mapped[k] = want
    return 0


cdef void columns_free(Columns *c, size_t *mapped) noexcept nogil:
    cdef void **slots = column_slots(c)
    cdef int k
    for k in range(NCOLUMNS):
        if slots[k] != NULL:
            kp_column_free(slots[k], mapped[k])
        slots[k] = NULL


cdef extern from "kp_flags.h" nogil:
    uint8_t kp_split_flags(const uint8_t *flags, int64_t n, uint8_t **bitmaps)


# ------------------------------------------------------------------ the driver
def count_frames(data, Py_ssize_t max_frame_size):
    """(frames, bytes framed) of a buffer of size-prefixed frames.

    A frame is counted when its 4-byte prefix is complete; counting stops after a
    size that is negative or above max_frame_size, or a frame cut short by the
    end of the buffer (both are rows, with a status). Bytes framed: up to the end
    of the last complete frame.
    """
    cdef Py_buffer view
    cdef Py_ssize_t pos = 0, n = 0, framed = 0
    cdef int32_t size
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const unsigned char *buf = <const unsigned char *>view.buf
    cdef Py_ssize_t length = view.len
    try:
        with nogil:
            while length - pos >= 4:
                size = <int32_t>kp_load_be32(buf + pos)
                n += 1
                if size < 0 or size > max_frame_size or length - pos - 4 < size:
                    break
                pos += 4 + size
                framed = pos
        return n, framed
    finally:
        PyBuffer_Release(&view)


cdef inline const void *array_ptr(object arr):
    return NULL if arr is None else <const void *><Py_ssize_t>arr.ctypes.data


cdef tuple id_dictionary(const IdTable *t):
    """The ids' text by dictionary index, as Arrow string offsets (int64, count + 1)
    and data (bytes): no Python object per id. Reads the input (the ids live there)."""
    cdef Py_ssize_t k, total = 0, n
    for k in range(t.count):
        total += kp_load_be16(t.order[k])
    offsets = np.empty(t.count + 1, np.int64)
    data = PyBytes_FromStringAndSize(NULL, total)
    cdef int64_t *off = <int64_t *><Py_ssize_t>offsets.ctypes.data
    cdef char *out = PyBytes_AS_STRING(data)
    with nogil:
        total = 0
        for k in range(t.count):
            off[k] = total
            n = kp_load_be16(t.order[k])
            memcpy(out + total, t.order[k] + 2, n)
            total += n
        off[t.count] = total
    return offsets, data


def scan(data, Py_ssize_t count=-1, offsets=None, valid=None, directions=None, request_keys=None,
         request_versions=None, Py_ssize_t max_frame_size=0x7FFFFFFF, int default_direction=0,
         int default_key=-1, int default_version=-1, bint body_offsets=True):
    """Decode the headers of frames into column arrays (see kproto/batch.py).

    ``offsets`` None: ``data`` holds size-prefixed frames back to back, read in
    one pass (``count`` -1: as many as there are; per-frame inputs need the count).
    Otherwise ``offsets`` (int32 or int64, count + 1 values) delimit payloads in
    ``data``, as an Arrow binary array does, and ``valid`` (uint8 per frame, or
    None) marks null entries. Per-frame inputs are numpy arrays or None (then the
    ``default_*`` value applies to every frame). ``body_offsets`` False: no
    ``body_offset`` column (the header-only decode does not need where bodies start).
    """
    cdef Py_buffer view
    cdef Columns c
    cdef Py_ssize_t i = 0, pos = 0, framed = 0, start, n, capacity, limit
    cdef int32_t size
    cdef IdTable ids
    cdef IdCache cache
    cdef bint wide = False, prefixed = offsets is None, no_memory = False, plain_requests, shared_zeros
    cdef bint zeros_written = False
    cdef Py_ssize_t zero_from = 0
    cdef const int32_t *off32 = NULL
    cdef const int64_t *off64 = NULL
    cdef const uint8_t *validity = <const uint8_t *>array_ptr(valid)
    cdef const int8_t *dirs = <const int8_t *>array_ptr(directions)
    cdef const int16_t *rkeys = <const int16_t *>array_ptr(request_keys)
    cdef const int16_t *rversions = <const int16_t *>array_ptr(request_versions)
    cdef int direction, key, version
    cdef uint8_t *bitmaps[8]
    cdef uint8_t every_frame_has
    cdef size_t mapped[NCOLUMNS]

    if not prefixed:
        if count < 0 or len(offsets) != count + 1:
            raise ValueError("offsets must hold count + 1 values")
        wide = offsets.dtype == np.int64
        if wide:
            off64 = <const int64_t *>array_ptr(offsets)
        else:
            off32 = <const int32_t *>array_ptr(offsets)
    elif count < 0 and (dirs != NULL or rkeys != NULL or rversions != NULL):
        raise ValueError("per-frame inputs need the frame count")

    plain_requests = prefixed and dirs == NULL and default_direction == 0
    # Header-only decodes of plain requests do not write the four all-zero columns
    # (tag count, status, error offset, direction) for the rows of the plain loop.
    # While the other rows have zeros there too, the columns end up as a shared
    # page of zeros; from the first row with a value, they are written (see
    # general_row_done).
    shared_zeros = plain_requests and not body_offsets
    memset(&c, 0, sizeof(c))
    memset(mapped, 0, sizeof(mapped))
    id_cache_init(&cache)
    if id_table_init(&ids) < 0:
        id_table_free(&ids)
        raise MemoryError()
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    cdef const unsigned char *buf = <const unsigned char *>view.buf
    cdef Py_ssize_t length = view.len
    # Requests take at least 12 bytes with their prefix: grow (by remapping) if not.
    capacity = count if count >= 0 else length // 16 + 64
    columns_from_pool(&c, mapped, capacity)
    try:
        with nogil:
            if columns_resize(&c, mapped, capacity) < 0:
                no_memory = True
            while not no_memory:
                if plain_requests:
                    limit = capacity if count < 0 else min(capacity, count)
                    # Constant flags: one specialized loop each (see scan_plain_requests).
                    if shared_zeros:       # header-only: no body offsets, zeros left to general_row_done
                        i = scan_plain_requests(&c, i, limit, buf, length, &pos, max_frame_size, &ids, &cache,
                                                False, False)
                    else:                  # body offsets (for the body passes), zeros block by block
                        i = scan_plain_requests(&c, i, limit, buf, length, &pos, max_frame_size, &ids, &cache,
                                                True, True)
                    framed = pos
                if count >= 0 and i >= count:
                    break
                if prefixed and length - pos < 4:
                    break
                if i == capacity:
                    capacity *= 2
                    if columns_resize(&c, mapped, capacity) < 0:
                        no_memory = True
                        break
                if zeros_written and zero_from < i:
                    # a row the plain loop did not take: the plain rows before it get their zeros now
                    clear_zero_columns_of(&c, zero_from, i)
                direction = dirs[i] if dirs != NULL else default_direction
                c.direction[i] = <int8_t>direction
                key = rkeys[i] if rkeys != NULL else default_key
                version = rversions[i] if rversions != NULL else default_version
                if prefixed:
                    size = <int32_t>kp_load_be32(buf + pos)
                    c.offset[i] = pos
                    c.size[i] = size
                    if size < 0 or size > max_frame_size:
                        clear_row(&c, i)
                        fail(&c, i, ST_BAD_LENGTH, -4)
                        if shared_zeros:
                            general_row_done(&c, i, &zeros_written, &zero_from)
                        i += 1
                        break   # no way to find the next frame
                    n = length - pos - 4
                    if n > size:
                        n = size
                    scan_frame(&c, i, buf + pos + 4, n, direction, key, version, &ids)
                    if n < size:
                        # The buffer ends inside this frame, whatever its header said.
                        if c.status[i] != ST_TRUNCATED:
                            fail(&c, i, ST_TRUNCATED, n)
                        c.body_offset[i] = -1
                        if shared_zeros:
                            general_row_done(&c, i, &zeros_written, &zero_from)
                        i += 1
                        break
                    pos += 4 + size
                    framed = pos
                else:
                    start = off64[i] if wide else off32[i]
                    n = (off64[i + 1] if wide else off32[i + 1]) - start
                    c.offset[i] = start
                    c.size[i] = <int32_t>n
                    if (validity != NULL and not validity[i]) or n < 0 or start < 0 or start + n > length:
                        clear_row(&c, i)
                        fail(&c, i, ST_NULL_FRAME if n >= 0 else ST_BAD_LENGTH, 0)
                    else:
                        scan_frame(&c, i, buf + start, n, direction, key, version, &ids)
                if c.status[i] == ST_NO_MEMORY:
                    no_memory = True
                if shared_zeros:
                    general_row_done(&c, i, &zeros_written, &zero_from)
                i += 1
            if zeros_written and zero_from < i:
                clear_zero_columns_of(&c, zero_from, i)
        if no_memory:
            raise MemoryError()
        client_id_offsets, client_id_data = id_dictionary(&ids)
    except BaseException:
        columns_free(&c, mapped)
        raise
    finally:
        PyBuffer_Release(&view)
        id_table_free(&ids)

    # Hand the columns over to numpy (no copy), then split the flags into bitmaps.
    cdef void **slots = column_slots(&c)
    cdef bint all_plain = shared_zeros and not zeros_written
    cols = {}
    for k in range(NCOLUMNS):
        if all_plain and ZERO_COLUMN[k] and i * ELEMENT_SIZE[k] <= ZERO_MAP_BYTES and zero_map() != NULL:
            pool_put(slots[k], mapped[k])
            owner = take_zeros(i * ELEMENT_SIZE[k])
        else:
            if all_plain and ZERO_COLUMN[k]:
                # No shared zeros (no mmap on this platform, or too many rows): the
                # plain loop never wrote this column, so it gets its zeros here.
                memset(slots[k], 0, i * ELEMENT_SIZE[k])
            owner = take_buffer(slots[k], i * ELEMENT_SIZE[k], mapped[k])
        slots[k] = NULL
        cols[COLUMN_NAMES[k]] = np.frombuffer(owner, dtype=COLUMN_TYPES[k])
    nbytes = (i + 7) // 8
    arrays = [np.empty(nbytes, np.uint8) for _ in range(8)]
    for k in range(8):
        bitmaps[k] = <uint8_t *>array_ptr(arrays[k])
    cdef const uint8_t *present = <const uint8_t *>array_ptr(cols["present"])
    with nogil:
        every_frame_has = kp_split_flags(present, i, bitmaps)
    for k in range(8):
        # A validity bitmap with every bit set is no bitmap at all (Arrow: no nulls).
        all_set = (every_frame_has >> k) & 1 and k < 6
        cols[BITMAP_NAMES[k]] = None if all_set else arrays[k]
    cols["client_id_offsets"] = client_id_offsets
    cols["client_id_data"] = client_id_data
    cols["count"] = i
    cols["framed"] = framed
    if not body_offsets:
        del cols["body_offset"]     # not kept up to date: nobody may read it
    return cols


# ------------------------------------------------------------------ the JSON pass
# A second, small interpreter over the message codec's compiled plans: it writes
# JSON text straight from the bytes, in the shape of Message.to_dict() (bytes and
# records as base64, UUIDs as canonical strings, unknown tagged fields under
# "_unknown_tags"). Fields a version lacks appear with their defaults, as in
# to_dict(); that text is rendered once per plan.

cdef struct JField:
    int kind
    int elem_kind
    bint nullable
    bint compact
    int tag
    const char *key          # '"name":'
    Py_ssize_t key_len
    const char *default_json # for tagged fields that are absent
    Py_ssize_t default_len
    void *child              # JPlan of struct fields and struct arrays
    int role                 # R_*: what the partition pass takes from this field (0: nothing)


cdef struct JPlan:
    JField *fields
    Py_ssize_t nfields
    JField *tagged
    Py_ssize_t ntagged
    const char *absent       # '"a":0,"b":null' of the fields this version lacks
    Py_ssize_t absent_len
    bint flexible
    int level                # partition pass: 1 a topic struct, 2 a partition struct, else 0


cdef list _keep_alive = []          # bytes the plans point into: kept for the process
cdef dict _jplans = {}              # id(CPlan) -> address of its JPlan
cdef JPlan *plan_table[2][MAX_KEY][MAX_VERSION]
memset(plan_table, 0, sizeof(plan_table))


cdef const char *kept(bytes text):
    _keep_alive.append(text)
    return <const char *>text


cdef void fill_field(JField *f, FieldOp *op) except *:
    name = <str>op.name
    key = (_json.dumps(name) + ":").encode()
    f.kind = op.kind
    f.elem_kind = op.elem_kind
    f.nullable = op.nullable
    f.compact = op.compact
    f.tag = op.tag
    f.key = kept(key)
    f.key_len = len(key)
    default = _json.dumps(_plain((<object>op.pyop).fresh_default()), separators=(",", ":"),
                          ensure_ascii=False).encode()
    f.default_json = kept(default)
    f.default_len = len(default)
    f.child = NULL
    if op.child != NULL:
        f.child = json_plan(<CPlan>op.child)


cdef JPlan *json_plan(CPlan cp) except NULL:
    cached = _jplans.get(id(cp))
    if cached is not None:
        return <JPlan *><Py_ssize_t>cached
    _keep_alive.append(cp)
    cdef JPlan *jp = <JPlan *>calloc(1, sizeof(JPlan))
    if jp == NULL:
        raise MemoryError()
    jp.fields = <JField *>calloc(cp.nfields + 1, sizeof(JField))
    jp.tagged = <JField *>calloc(cp.ntagged + 1, sizeof(JField))
    if jp.fields == NULL or jp.tagged == NULL:
        raise MemoryError()
    jp.nfields = cp.nfields
    jp.ntagged = cp.ntagged
    jp.flexible = cp.flexible
    cdef Py_ssize_t i
    for i in range(cp.nfields):
        fill_field(&jp.fields[i], &cp.fields[i])
    for i in range(cp.ntagged):
        fill_field(&jp.tagged[i], &cp.tagged[i])
    parts = []
    for i in range(cp.nabsent):
        op = <object>cp.absent[i].pyop
        parts.append(_json.dumps(op.name) + ":" + _json.dumps(_plain(op.fresh_default()),
                                                             separators=(",", ":"), ensure_ascii=False))
    absent = ",".join(parts).encode()
    jp.absent = kept(absent)
    jp.absent_len = len(absent)
    _jplans[id(cp)] = <Py_ssize_t>jp
    return jp


cdef struct Out:
    char *buf
    Py_ssize_t length
    Py_ssize_t capacity


# Produce requests and Fetch responses per topic-partition (the partition pass):
# the JSON walk, with fields marked by role noted as they pass.
cdef enum:
    R_TOPIC_NAME = 1
    R_TOPIC_ID = 2
    R_PARTITION_INDEX = 3
    R_ERROR_CODE = 4
    R_RECORDS = 5


cdef struct PartRow:
    int64_t frame
    const unsigned char *topic       # NULL: null (or absent)
    int32_t topic_len
    const unsigned char *topic_id    # 16 bytes; NULL: absent
    int32_t partition
    int16_t error_code
    bint has_error_code
    const unsigned char *records     # NULL: null
    int64_t records_len


cdef struct PartRows:
    PartRow *rows
    Py_ssize_t count
    Py_ssize_t capacity


cdef struct JCtx:
    const unsigned char *start   # the payload: error offsets count from here
    const unsigned char *p
    const unsigned char *end
    Out *out
    int status
    Py_ssize_t error
    int depth
    bint records_summary   # records fields as {"batches","records","bytes","compression"}, not base64
    PartRows *parts        # the partition pass's rows (NULL in the JSON pass)
    PartRow current        # ... and the topic and partition being read


cdef inline int jfail(JCtx *x, int status) noexcept nogil:
    if x.status == ST_OK:
        x.status = status
        x.error = x.p - x.start
    return -1


cdef int out_grow(JCtx *x, Py_ssize_t n) noexcept nogil:
    cdef Out *o = x.out
    cdef Py_ssize_t capacity = o.capacity * 2
    cdef char *buf
    if capacity < o.length + n:
        capacity = o.length + n
    buf = <char *>realloc(o.buf, capacity)
    if buf == NULL:
        return jfail(x, ST_NO_MEMORY)
    o.buf = buf
    o.capacity = capacity
    return 0


cdef inline int put(JCtx *x, const char *s, Py_ssize_t n) noexcept nogil:
    cdef Out *o = x.out
    if o.capacity - o.length < n and out_grow(x, n) < 0:
        return -1
    memcpy(o.buf + o.length, s, n)
    o.length += n
    return 0


cdef inline int put_char(JCtx *x, char ch) noexcept nogil:
    cdef Out *o = x.out
    if o.capacity - o.length < 1 and out_grow(x, 1) < 0:
        return -1
    o.buf[o.length] = ch
    o.length += 1
    return 0


cdef inline int put_int(JCtx *x, int64_t v) noexcept nogil:
    cdef char tmp[24]
    cdef int n = 0
    cdef uint64_t u = <uint64_t>(-(v + 1)) + 1 if v < 0 else <uint64_t>v
    while True:
        tmp[23 - n] = <char>(48 + u % 10)
        n += 1
        u //= 10
        if u == 0:
            break
    if v < 0:
        tmp[23 - n] = b'-'
        n += 1
    return put(x, tmp + 24 - n, n)


cdef int put_float(JCtx *x, double v) noexcept nogil:
    cdef char tmp[40]
    cdef int n, k
    cdef bint plain = True
    if v != v:
        return put(x, "NaN", 3)
    if v == 1.0 / 0.0:
        return put(x, "Infinity", 8)
    if v == -1.0 / 0.0:
        return put(x, "-Infinity", 9)
    n = snprintf(tmp, 32, "%.17g", v)
    for k in range(n):
        if tmp[k] == b'.' or tmp[k] == b'e':
            plain = False
    if plain:   # keep it a float, as json.dumps does
        tmp[n] = b'.'
        tmp[n + 1] = b'0'
        n += 2
    return put(x, tmp, n)


cdef const char *HEX = "0123456789abcdef"
cdef const char *CODEC_NAMES[5]
CODEC_NAMES[:] = [b"none", b"gzip", b"snappy", b"lz4", b"zstd"]


cdef int put_records_summary(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """{"batches":B,"records":R,"bytes":N,"compression":C} of a record set, from batch headers only.

    Batches are counted while whole ones follow (a partial last batch, which
    Kafka allows in Fetch responses, is left out); records is null when a legacy
    compressed wrapper hides the count; compression is null without batches,
    "mixed" for several codecs.
    """
    cdef Py_ssize_t pos = 0, batches = 0, length
    cdef int64_t records = 0
    cdef bint records_known = True
    cdef int codec = -1, this_codec, magic
    while n - pos >= 17:
        length = <int32_t>kp_load_be32(p + pos + 8)
        if length < 5 or length > n - pos - 12:
            break
        magic = p[pos + 16]
        if magic == 2:
            if length < 49:
                break
            this_codec = kp_load_be16(p + pos + 21) & 7
            records += <int32_t>kp_load_be32(p + pos + 57)
        elif magic == 0 or magic == 1:
            if length < 6:
                break
            this_codec = p[pos + 17] & 7
            if this_codec == 0:
                records += 1
            else:
                records_known = False
        else:
            break
        codec = this_codec if codec == -1 or codec == this_codec else 8
        batches += 1
        pos += 12 + length
    if put(x, "{\"batches\":", 11) < 0 or put_int(x, batches) < 0 or put(x, ",\"records\":", 11) < 0:
        return -1
    if (put_int(x, records) if records_known else put(x, "null", 4)) < 0:
        return -1
    if put(x, ",\"bytes\":", 9) < 0 or put_int(x, n) < 0 or put(x, ",\"compression\":", 15) < 0:
        return -1
    if codec == -1:
        return put(x, "null}", 5)
    if codec == 8:
        return put(x, "\"mixed\"}", 8)
    if codec > 4:
        if put(x, "\"unknown(", 9) < 0 or put_int(x, codec) < 0:
            return -1
        return put(x, ")\"}", 3)
    if put_char(x, b'"') < 0 or put(x, CODEC_NAMES[codec], strlen(CODEC_NAMES[codec])) < 0:
        return -1
    return put(x, "\"}", 2)


cdef const char *B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


cdef int put_base64(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t need = 2 + 4 * ((n + 2) // 3), i = 0
    cdef Out *o = x.out
    cdef char *w
    cdef uint32_t v
    if o.capacity - o.length < need and out_grow(x, need) < 0:
        return -1
    w = o.buf + o.length
    w[0] = b'"'
    w += 1
    while n - i >= 3:
        v = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8) | p[i + 2]
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = B64[(v >> 6) & 63]
        w[3] = B64[v & 63]
        w += 4
        i += 3
    if n - i == 1:
        v = <uint32_t>p[i] << 16
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = b'='
        w[3] = b'='
        w += 4
    elif n - i == 2:
        v = (<uint32_t>p[i] << 16) | (<uint32_t>p[i + 1] << 8)
        w[0] = B64[(v >> 18) & 63]
        w[1] = B64[(v >> 12) & 63]
        w[2] = B64[(v >> 6) & 63]
        w[3] = b'='
        w += 4
    w[0] = b'"'
    o.length += need
    return 0


cdef int put_string(JCtx *x, const unsigned char *p, Py_ssize_t n) noexcept nogil:
    """A JSON string of UTF-8 text, escaped; MALFORMED (at the text) when not UTF-8."""
    cdef Py_ssize_t i, run = 0
    cdef unsigned char ch
    cdef char esc[6]
    if not wire_utf8_valid(p, n):
        return jfail(x, ST_MALFORMED)
    if put_char(x, b'"') < 0:
        return -1
    for i in range(n):
        ch = p[i]
        if ch >= 0x20 and ch != b'"' and ch != b'\\':
            continue
        if put(x, <const char *>p + run, i - run) < 0:
            return -1
        run = i + 1
        if ch == b'"' or ch == b'\\':
            esc[0] = b'\\'
            esc[1] = ch
            if put(x, esc, 2) < 0:
                return -1
        else:
            esc[0] = b'\\'
            esc[1] = b'u'
            esc[2] = b'0'
            esc[3] = b'0'
            esc[4] = HEX[ch >> 4]
            esc[5] = HEX[ch & 15]
            if put(x, esc, 6) < 0:
                return -1
    if put(x, <const char *>p + run, n - run) < 0:
        return -1
    return put_char(x, b'"')


cdef inline int jneed(JCtx *x, Py_ssize_t n) noexcept nogil:
    if x.end - x.p < n:
        return jfail(x, ST_TRUNCATED)
    return 0


cdef inline int juvarint(JCtx *x, uint32_t *out) noexcept nogil:
    cdef Py_ssize_t pos = x.p - x.start
    cdef int st = wire_uvarint(x.start, x.end - x.start, &pos, out)
    x.p = x.start + pos
    if st:
        return jfail(x, st)
    return 0


cdef int jlength(JCtx *x, bint compact, bint wide, bint nullable, Py_ssize_t *n) noexcept nogil:
    """A string / bytes length prefix: n = -1 for null; checked against the bytes left."""
    cdef uint32_t u
    cdef int64_t v
    if compact:
        if juvarint(x, &u) < 0:
            return -1
        if u == 0:
            if nullable:
                n[0] = -1
                return 0
            return jfail(x, ST_BAD_LENGTH)
        if u - 1 > <uint32_t>0x7FFFFFFF:
            return jfail(x, ST_BAD_LENGTH)
        v = <int64_t>u - 1
    else:
        if jneed(x, 4 if wide else 2) < 0:
            return -1
        if wide:
            v = <int32_t>kp_load_be32(x.p)
            x.p += 4
        else:
            v = <int16_t>kp_load_be16(x.p)
            x.p += 2
        if v < 0:
            if v == -1 and nullable:
                n[0] = -1
                return 0
            return jfail(x, ST_BAD_LENGTH)
    if x.end - x.p < v:
        return jfail(x, ST_TRUNCATED)
    n[0] = <Py_ssize_t>v
    return 0


cdef int jvalue(JCtx *x, JField *f, int kind, bint nullable) noexcept nogil:
    cdef Py_ssize_t n, i
    cdef uint32_t u
    cdef int64_t count
    cdef int8_t marker
    cdef uint64_t hi, lo
    cdef char uuid_text[38]
    cdef int k, w
    if kind == K_INT32:
        if jneed(x, 4) < 0:
            return -1
        x.p += 4
        return put_int(x, <int32_t>kp_load_be32(x.p - 4))
    if kind == K_STRING:
        if jlength(x, f.compact, False, nullable, &n) < 0:
            return -1
        if n < 0:
            return put(x, "null", 4)
        if put_string(x, x.p, n) < 0:
            return -1
        x.p += n
        return 0
    if kind == K_INT16:
        if jneed(x, 2) < 0:
            return -1
        x.p += 2
        return put_int(x, <int16_t>kp_load_be16(x.p - 2))
    if kind == K_INT64:
        if jneed(x, 8) < 0:
            return -1
        x.p += 8
        return put_int(x, <int64_t>kp_load_be64(x.p - 8))
    if kind == K_ARRAY:
        if f.compact:
            if juvarint(x, &u) < 0:
                return -1
            count = <int64_t>u - 1
        else:
            if jneed(x, 4) < 0:
                return -1
            count = <int32_t>kp_load_be32(x.p)
            x.p += 4
        if count < 0:
            if count == -1 and nullable:
                return put(x, "null", 4)
            return jfail(x, ST_BAD_LENGTH)
        if count > x.end - x.p:
            return jfail(x, ST_BAD_LENGTH)
        if put_char(x, b'[') < 0:
            return -1
        for i in range(count):
            if i and put_char(x, b',') < 0:
                return -1
            if jvalue(x, f, f.elem_kind, False) < 0:
                return -1
        return put_char(x, b']')
    if kind == K_STRUCT:
        if nullable:
            if jneed(x, 1) < 0:
                return -1
            marker = <int8_t>x.p[0]
            x.p += 1
            if marker == -1:
                return put(x, "null", 4)
            if marker != 1:
                return jfail(x, ST_MALFORMED)
        return jstruct(x, <JPlan *>f.child)
    if kind == K_INT8:
        if jneed(x, 1) < 0:
            return -1
        x.p += 1
        return put_int(x, <int8_t>x.p[-1])
    if kind == K_BOOL:
        if jneed(x, 1) < 0:
            return -1
        x.p += 1
        return put(x, "true", 4) if x.p[-1] else put(x, "false", 5)
    if kind == K_UUID:
        if jneed(x, 16) < 0:
            return -1
        w = 0
        uuid_text[w] = b'"'
        w += 1
        for k in range(16):
            if k == 4 or k == 6 or k == 8 or k == 10:
                uuid_text[w] = b'-'
                w += 1
            uuid_text[w] = HEX[x.p[k] >> 4]
            uuid_text[w + 1] = HEX[x.p[k] & 15]
            w += 2
        uuid_text[w] = b'"'
        x.p += 16
        return put(x, uuid_text, 38)
    if kind == K_BYTES or kind == K_RECORDS:
        if jlength(x, f.compact, True, nullable, &n) < 0:
            return -1
        if n < 0:
            return put(x, "null", 4)
        if kind == K_RECORDS and x.records_summary:
            if put_records_summary(x, x.p, n) < 0:
                return -1
            x.p += n
            return 0
        if put_base64(x, x.p, n) < 0:
            return -1
        x.p += n
        return 0
    if kind == K_UINT16:
        if jneed(x, 2) < 0:
            return -1
        x.p += 2
        return put_int(x, kp_load_be16(x.p - 2))
    if kind == K_UINT32:
        if jneed(x, 4) < 0:
            return -1
        x.p += 4
        return put_int(x, kp_load_be32(x.p - 4))
    if kind == K_FLOAT64:
        if jneed(x, 8) < 0:
            return -1
        x.p += 8
        return put_float(x, kp_load_be_double(x.p - 8))
    return jfail(x, ST_MALFORMED)


cdef inline int jkey(JCtx *x, bint *first, const char *key, Py_ssize_t n) noexcept nogil:
    if not first[0] and put_char(x, b',') < 0:
        return -1
    first[0] = False
    return put(x, key, n)


cdef inline void part_enter(JCtx *x, int level) noexcept nogil:
    # A topic starts afresh; a partition keeps its topic's name and id.
    if level == 1:
        x.current.topic = NULL
        x.current.topic_len = 0
        x.current.topic_id = NULL
    x.current.partition = 0
    x.current.error_code = 0
    x.current.has_error_code = False
    x.current.records = NULL
    x.current.records_len = 0


cdef inline Py_ssize_t length_at(const unsigned char *p, bint compact, bint wide, Py_ssize_t *prefix) noexcept nogil:
    """A length prefix jvalue has already checked: the length (-1 null) and the prefix's size."""
    cdef Py_ssize_t pos = 0
    cdef uint32_t u = 0
    if compact:
        wire_uvarint(p, 5, &pos, &u)
        prefix[0] = pos
        return <Py_ssize_t>u - 1
    prefix[0] = 4 if wide else 2
    return <int32_t>kp_load_be32(p) if wide else <int16_t>kp_load_be16(p)


cdef void part_note(JCtx *x, JField *f, const unsigned char *p) noexcept nogil:
    """Take a marked field's value from its bytes (p: where it starts; jvalue read it whole)."""
    cdef Py_ssize_t n, prefix
    if f.role == R_TOPIC_NAME:
        n = length_at(p, f.compact, False, &prefix)
        x.current.topic = p + prefix if n > 0 else NULL   # an empty name reads as null
        x.current.topic_len = <int32_t>n if n > 0 else 0
    elif f.role == R_TOPIC_ID:
        x.current.topic_id = p
    elif f.role == R_PARTITION_INDEX:
        x.current.partition = <int32_t>kp_load_be32(p)
    elif f.role == R_ERROR_CODE:
        x.current.error_code = <int16_t>kp_load_be16(p)
        x.current.has_error_code = True
    elif f.role == R_RECORDS:
        n = length_at(p, f.compact, True, &prefix)
        x.current.records = p + prefix if n >= 0 else NULL
        x.current.records_len = n if n >= 0 else 0


cdef int part_append(JCtx *x) noexcept nogil:
    cdef PartRows *rows = x.parts
    cdef PartRow *grown
    cdef Py_ssize_t capacity
    if rows.count == rows.capacity:
        capacity = rows.capacity * 2 if rows.capacity else 1024
        grown = <PartRow *>realloc(rows.rows, capacity * sizeof(PartRow))
        if grown == NULL:
            return jfail(x, ST_NO_MEMORY)
        rows.rows = grown
        rows.capacity = capacity
    rows.rows[rows.count] = x.current
    rows.count += 1
    return 0


cdef int jstruct(JCtx *x, JPlan *jp) noexcept nogil:
    cdef bint first = True
    cdef Py_ssize_t i, j
    cdef uint32_t count, k, tag, size
    cdef int64_t previous = -1
    cdef uint64_t seen = 0
    cdef bint unknown = False
    cdef const unsigned char *section
    cdef const unsigned char *outer_end
    cdef JField *f
    cdef const unsigned char *field_start
    if x.depth >= MAX_DEPTH:
        return jfail(x, ST_LIMIT_EXCEEDED)
    x.depth += 1
    if x.parts != NULL and jp.level:
        part_enter(x, jp.level)
    if put_char(x, b'{') < 0:
        return -1
    for i in range(jp.nfields):
        f = &jp.fields[i]
        field_start = x.p
        if jkey(x, &first, f.key, f.key_len) < 0 or jvalue(x, f, f.kind, f.nullable) < 0:
            return -1
        if f.role and x.parts != NULL:
            part_note(x, f, field_start)
    if jp.flexible:
        section = x.p
        if juvarint(x, &count) < 0:
            return -1
        if count > <uint32_t>(x.end - x.p):
            return jfail(x, ST_BAD_LENGTH)
        for k in range(count):
            if juvarint(x, &tag) < 0:
                return -1
            if <int64_t>tag <= previous:
                return jfail(x, ST_MALFORMED)
            previous = tag
            if juvarint(x, &size) < 0:
                return -1
            if size > <uint32_t>(x.end - x.p):
                return jfail(x, ST_TRUNCATED)
            f = NULL
            for j in range(jp.ntagged):
                if jp.tagged[j].tag == <int>tag:
                    f = &jp.tagged[j]
                    break
            if f == NULL:
                unknown = True
                x.p += size
                continue
            seen |= (<uint64_t>1) << j
            outer_end = x.end
            x.end = x.p + size
            if jkey(x, &first, f.key, f.key_len) < 0 or jvalue(x, f, f.kind, f.nullable) < 0:
                return -1
            if x.p != x.end:
                return jfail(x, ST_BAD_LENGTH)
            x.end = outer_end
        for j in range(jp.ntagged):
            if not (seen >> j) & 1:
                f = &jp.tagged[j]
                if jkey(x, &first, f.key, f.key_len) < 0 or put(x, f.default_json, f.default_len) < 0:
                    return -1
    if jp.absent_len:
        if not first and put_char(x, b',') < 0:
            return -1
        first = False
        if put(x, jp.absent, jp.absent_len) < 0:
            return -1
    if unknown:
        # Second walk over the (already checked) section for the tags no plan knows.
        outer_end = x.p
        x.p = section
        juvarint(x, &count)
        if jkey(x, &first, "\"_unknown_tags\":{", 17) < 0:
            return -1
        previous = 0   # now: "an entry was written"
        for k in range(count):
            juvarint(x, &tag)
            juvarint(x, &size)
            f = NULL
            for j in range(jp.ntagged):
                if jp.tagged[j].tag == <int>tag:
                    f = &jp.tagged[j]
                    break
            if f == NULL:
                if previous and put_char(x, b',') < 0:
                    return -1
                previous = 1
                if put_char(x, b'"') < 0 or put_int(x, tag) < 0 or put(x, "\":", 2) < 0 \
                        or put_base64(x, x.p, size) < 0:
                    return -1
            x.p += size
        if put_char(x, b'}') < 0:
            return -1
        x.p = outer_end
    x.depth -= 1
    if x.parts != NULL and jp.level == 2 and part_append(x) < 0:
        return -1
    return put_char(x, b'}')


cdef JPlan *table_plan(int direction, int key, int version) noexcept nogil:
    if direction < 0 or direction > 1 or key < 0 or key >= MAX_KEY or version < 0 or version >= MAX_VERSION:
        return NULL
    return plan_table[direction][key][version]


cdef int ensure_plan(int direction, int key, int version) except -1:
    if table_plan(direction, key, version) != NULL:
        return 0
    name = schema.response_name(key) if direction == 1 else schema.request_name(key)
    plan_table[direction][key][version] = json_plan(native_plan(schema.plan(name, version)))
    return 0


cdef list present_versions(dict cols, rows):
    """The distinct (direction, api_key, api_version) of ``rows`` (a mask or indices)."""
    codes = np.unique(cols["direction"][rows].astype(np.int64) * 1_000_000
                      + cols["api_key"][rows].astype(np.int64) * 1000 + cols["api_version"][rows])
    return [(code // 1_000_000, (code // 1000) % 1000, code % 1000) for code in codes.tolist()]


cdef int out_init(Out *out, Py_ssize_t capacity) except -1:
    out.capacity = capacity
    out.length = 0
    out.buf = <char *>malloc(capacity)
    if out.buf == NULL:
        raise MemoryError()
    return 0


cdef inline void jctx_start(JCtx *x, const unsigned char *payload, Py_ssize_t size, Py_ssize_t body,
                            Out *out, bint records_summary, PartRows *parts) noexcept nogil:
    """Set up the walk of one frame's body (payload: the frame after its size prefix)."""
    x.start = payload
    x.end = payload + size
    x.p = payload + body
    x.out = out
    x.status = ST_OK
    x.error = 0
    x.depth = 0
    x.records_summary = records_summary
    x.parts = parts


def json_bodies(data, dict cols, offsets=None, bint records_summary=False):
    """JSON text of the body of every frame whose header read OK: (int64 offsets, UTF-8 bytes).

    ``records_summary``: records fields as a summary of their batch headers
    (``{"batches","records","bytes","compression"}``) instead of base64.

    A body that fails to decode gets its status and error offset written into
    ``cols`` and no text (the caller marks it null).
    """
    cdef Py_buffer view
    cdef Py_ssize_t count = len(cols["status"]), i, start, row_start
    cdef uint8_t[::1] status = cols["status"]
    cdef int32_t[::1] error_offset = cols["error_offset"]
    cdef const int32_t[::1] body_offset = cols["body_offset"]
    cdef const int64_t[::1] frame_offset = cols["offset"]
    cdef const int32_t[::1] size = cols["size"]
    cdef const int16_t[::1] api_key = cols["api_key"]
    cdef const int16_t[::1] api_version = cols["api_version"]
    cdef const int8_t[::1] direction = cols["direction"]
    out_offsets = np.zeros(count + 1, np.int64)
    cdef int64_t[::1] text_offset = out_offsets
    cdef Py_ssize_t prefix = 4 if offsets is None else 0
    cdef Out out
    cdef JCtx x
    cdef JPlan *jp
    cdef int version, first_status
    cdef Py_ssize_t first_error
    cdef bint no_memory = False

    # Plans for every (direction, api, version) present, built with the GIL held.
    ok = (cols["status"] == ST_OK) & (cols["body_offset"] >= 0)
    for d, key, version in present_versions(cols, ok):
        ensure_plan(d, key, version)
        if d == 1 and key == API_VERSIONS:
            ensure_plan(1, API_VERSIONS, 0)

    out_init(&out, 1 << 16)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            for i in range(count):
                text_offset[i] = out.length
                if status[i] != ST_OK or body_offset[i] < 0:
                    continue
                start = frame_offset[i] + prefix
                jctx_start(&x, <const unsigned char *>view.buf + start, size[i], body_offset[i], &out,
                           records_summary, NULL)
                version = api_version[i]
                jp = table_plan(direction[i], api_key[i], version)
                if jp == NULL:
                    continue
                row_start = out.length
                if jstruct(&x, jp) == 0 and x.p != x.end:
                    jfail(&x, ST_BAD_LENGTH)
                # ApiVersions responses as kproto.api.decode_response reads them (KIP-511, as
                # Java does): at the version asked, else as v0; neither: the first error.
                if x.status != ST_OK and x.status != ST_NO_MEMORY and direction[i] == 1 \
                        and api_key[i] == API_VERSIONS and version > 0:
                    first_status = x.status
                    first_error = x.error
                    out.length = row_start
                    jctx_start(&x, <const unsigned char *>view.buf + start, size[i], body_offset[i], &out,
                               records_summary, NULL)
                    if jstruct(&x, table_plan(1, API_VERSIONS, 0)) == 0 and x.p != x.end:
                        jfail(&x, ST_BAD_LENGTH)
                    if x.status != ST_OK and x.status != ST_NO_MEMORY:
                        x.status = first_status
                        x.error = first_error
                if x.status != ST_OK:
                    out.length = row_start
                    if x.status == ST_NO_MEMORY:
                        no_memory = True
                        break
                    status[i] = <uint8_t>x.status
                    error_offset[i] = <int32_t>x.error
            text_offset[count] = out.length
        if no_memory:
            raise MemoryError()
        return out_offsets, PyBytes_FromStringAndSize(out.buf, out.length)
    finally:
        PyBuffer_Release(&view)
        free(out.buf)


cdef enum:
    API_VERSIONS = 18


# ------------------------------------------------------------------ the partition pass
# Produce requests and Fetch responses, one row per topic-partition: the JSON walk
# (output thrown away frame by frame) notes the fields marked with a role, and
# each record set is summarized from its batch headers. Record sets this loop
# does not summarize itself (legacy magic 0/1, unknown codecs, corrupt batches)
# go back to Python as "fallback" rows, which kproto.batch reads with the records
# module, so their counts and error text are the records module's own.
cdef enum:
    PRODUCE = 0
    FETCH = 1
    CODEC_MIXED = 5


cdef void mark_roles(JPlan *jp, CPlan cp, int level, bint produce) except *:
    cdef Py_ssize_t i
    cdef JField *f
    for i in range(cp.nfields):
        name = <str>cp.fields[i].name
        f = &jp.fields[i]
        if level == 0:
            if name == ("topic_data" if produce else "responses") and f.child != NULL:
                (<JPlan *>f.child).level = 1
                mark_roles(<JPlan *>f.child, <CPlan>cp.fields[i].child, 1, produce)
        elif level == 1:
            if name == ("name" if produce else "topic"):
                f.role = R_TOPIC_NAME
            elif name == "topic_id":
                f.role = R_TOPIC_ID
            elif name == ("partition_data" if produce else "partitions") and f.child != NULL:
                (<JPlan *>f.child).level = 2
                mark_roles(<JPlan *>f.child, <CPlan>cp.fields[i].child, 2, produce)
        else:
            if name == ("index" if produce else "partition_index"):
                f.role = R_PARTITION_INDEX
            elif name == "error_code" and not produce:
                f.role = R_ERROR_CODE
            elif name == "records":
                f.role = R_RECORDS


cdef set _marked = set()


cdef int ensure_partition_plan(int direction, int key, int version) except -1:
    ensure_plan(direction, key, version)
    if (direction, key, version) not in _marked:
        name = schema.response_name(key) if direction == 1 else schema.request_name(key)
        mark_roles(table_plan(direction, key, version), native_plan(schema.plan(name, version)), 0,
                   key == PRODUCE)
        _marked.add((direction, key, version))
    return 0


cdef struct RecordsSummary:
    int32_t batches
    int64_t records
    int codec               # -1 no batch, 0-4, CODEC_MIXED
    int64_t producer_id
    bint has_producer_id
    bint fallback           # not summarized here: the records module reads it


cdef void summarize_v2(const unsigned char *p, Py_ssize_t n, RecordsSummary *s) noexcept nogil:
    """What kproto.batch._partition_row reads from a record set, for magic 2 batches.

    The checks are those of the records module's batch iterator; anything it
    would raise on, and every legacy batch, sets ``fallback`` instead.
    """
    cdef Py_ssize_t pos = 0, left
    cdef int32_t length
    cdef int magic, codec
    s.batches = 0
    s.records = 0
    s.codec = -1
    s.producer_id = 0
    s.has_producer_id = False
    s.fallback = False
    while True:
        left = n - pos
        if left < 12:
            return            # the end, or a cut-short tail (not an error)
        length = <int32_t>kp_load_be32(p + pos + 8)
        if length < 0:
            s.fallback = True
            return
        if left >= 17:
            magic = p[pos + 16]
            if magic != 2 or length < 49:
                s.fallback = True   # legacy, unknown magic or too short: the records module says
                return
        if 12 + <Py_ssize_t>length > left:
            return            # cut short
        codec = kp_load_be16(p + pos + 21) & 7
        if codec > 4:
            s.fallback = True
            return
        if s.batches == 0:
            s.producer_id = <int64_t>kp_load_be64(p + pos + 43)
            s.has_producer_id = True
        s.batches += 1
        s.records += <int32_t>kp_load_be32(p + pos + 57)
        s.codec = codec if s.codec == -1 or s.codec == codec else CODEC_MIXED
        pos += 12 + length


def partition_rows(data, dict cols, offsets=None):
    """Produce requests and Fetch responses per topic-partition, from the header columns.

    Returns the dict kproto.batch.partitions builds its table from (the same
    keys from the twin): numeric columns as numpy arrays with ``*_valid`` masks,
    ``topic`` / ``topic_id`` as (offsets, bytes, valid), ``codec`` (-1 none,
    0-4, 5 mixed) and ``fallback``: (row, memoryview) of the record sets the
    records module must summarize. Frames whose body does not decode give no rows.
    """
    cdef Py_buffer view
    cdef Py_ssize_t count = len(cols["status"]), i, j, n, start
    cdef const uint8_t[::1] status = cols["status"]
    cdef const int32_t[::1] body_offset = cols["body_offset"]
    cdef const int64_t[::1] frame_offset = cols["offset"]
    cdef const int32_t[::1] size = cols["size"]
    cdef const int16_t[::1] api_key = cols["api_key"]
    cdef const int16_t[::1] api_version = cols["api_version"]
    cdef const int8_t[::1] direction = cols["direction"]
    cdef Py_ssize_t prefix = 4 if offsets is None else 0
    cdef Out out
    cdef JCtx x
    cdef JPlan *jp
    cdef PartRows parts
    cdef Py_ssize_t row_start
    cdef bint no_memory = False
    cdef RecordsSummary *summaries = NULL

    candidates = np.flatnonzero((cols["status"] == ST_OK) & (cols["body_offset"] >= 0) & (
        ((cols["api_key"] == PRODUCE) & (cols["direction"] == 0))
        | ((cols["api_key"] == FETCH) & (cols["direction"] == 1))))
    for d, key, version in present_versions(cols, candidates):
        ensure_partition_plan(d, key, version)
    cdef const int64_t[::1] rows = candidates.astype(np.int64)
    cdef Py_ssize_t nrows = len(candidates)

    memset(&parts, 0, sizeof(parts))
    out_init(&out, 1 << 12)
    PyObject_GetBuffer(data, &view, PyBUF_SIMPLE)
    try:
        with nogil:
            for j in range(nrows):
                i = rows[j]
                jp = table_plan(direction[i], api_key[i], api_version[i])
                if jp == NULL:
                    continue
                start = frame_offset[i] + prefix
                # records summarized (skipped), not written out as base64
                jctx_start(&x, <const unsigned char *>view.buf + start, size[i], body_offset[i], &out,
                           True, &parts)
                memset(&x.current, 0, sizeof(PartRow))
                x.current.frame = i
                out.length = 0
                row_start = parts.count
                if jstruct(&x, jp) == 0 and x.p != x.end:
                    jfail(&x, ST_BAD_LENGTH)
                if x.status != ST_OK:
                    parts.count = row_start   # a body that does not decode has no rows
                    if x.status == ST_NO_MEMORY:
                        no_memory = True
                        break
            if not no_memory and parts.count:
                summaries = <RecordsSummary *>malloc(parts.count * sizeof(RecordsSummary))
                if summaries == NULL:
                    no_memory = True
                else:
                    for j in range(parts.count):
                        if parts.rows[j].records == NULL:
                            memset(&summaries[j], 0, sizeof(RecordsSummary))
                            summaries[j].codec = -1
                        else:
                            summarize_v2(parts.rows[j].records, parts.rows[j].records_len, &summaries[j])
        if no_memory:
            raise MemoryError()

        n = parts.count
        columns = {
            "frame": np.empty(n, np.int64), "api_key": np.empty(n, np.int16),
            "direction": np.empty(n, np.int8), "partition": np.empty(n, np.int32),
            "error_code": np.zeros(n, np.int16), "error_code_valid": np.zeros(n, np.bool_),
            "batch_count": np.zeros(n, np.int32), "record_count": np.zeros(n, np.int64),
            "record_count_valid": np.ones(n, np.bool_), "bytes": np.zeros(n, np.int64),
            "codec": np.full(n, -1, np.int8), "producer_id": np.zeros(n, np.int64),
            "producer_id_valid": np.zeros(n, np.bool_),
        }
        fill_partition_columns(parts.rows, summaries, n, api_key, direction, columns)
        columns["topic"] = topic_column(parts.rows, n)
        columns["topic_id"] = topic_id_column(parts.rows, n)
        frame_view = memoryview(data).cast("B")
        fallback = []
        for j in range(n):
            if summaries[j].fallback:
                start = parts.rows[j].records - <const unsigned char *>view.buf
                fallback.append((j, frame_view[start:start + parts.rows[j].records_len]))
        columns["fallback"] = fallback
        return columns
    finally:
        PyBuffer_Release(&view)
        free(out.buf)
        free(parts.rows)
        free(summaries)


cdef void fill_partition_columns(PartRow *rows, RecordsSummary *summaries, Py_ssize_t n,
                                 const int16_t[::1] api_key, const int8_t[::1] direction, dict columns):
    cdef int64_t[::1] frame = columns["frame"]
    cdef int16_t[::1] keys = columns["api_key"]
    cdef int8_t[::1] dirs = columns["direction"]
    cdef int32_t[::1] partition = columns["partition"]
    cdef int16_t[::1] error_code = columns["error_code"]
    cdef uint8_t[::1] error_code_valid = columns["error_code_valid"].view(np.uint8)
    cdef int32_t[::1] batch_count = columns["batch_count"]
    cdef int64_t[::1] record_count = columns["record_count"]
    cdef int64_t[::1] nbytes = columns["bytes"]
    cdef int8_t[::1] codec = columns["codec"]
    cdef int64_t[::1] producer_id = columns["producer_id"]
    cdef uint8_t[::1] producer_id_valid = columns["producer_id_valid"].view(np.uint8)
    cdef Py_ssize_t j, i
    with nogil:
        for j in range(n):
            i = rows[j].frame
            frame[j] = i
            keys[j] = api_key[i]
            dirs[j] = direction[i]
            partition[j] = rows[j].partition
            if rows[j].has_error_code:
                error_code[j] = rows[j].error_code
                error_code_valid[j] = 1
            nbytes[j] = rows[j].records_len
            if summaries[j].fallback:
                continue
            batch_count[j] = summaries[j].batches
            record_count[j] = summaries[j].records
            codec[j] = <int8_t>summaries[j].codec
            if summaries[j].has_producer_id:
                producer_id[j] = summaries[j].producer_id
                producer_id_valid[j] = 1


cdef tuple topic_column(PartRow *rows, Py_ssize_t n):
    """(int32 offsets, bytes, bool valid) of the topic names (null: NULL pointer)."""
    cdef Py_ssize_t j, total = 0
    offsets = np.zeros(n + 1, np.int32)
    valid = np.zeros(n, np.bool_)
    cdef int32_t[::1] off = offsets
    cdef uint8_t[::1] ok = valid.view(np.uint8)
    for j in range(n):
        if rows[j].topic != NULL:
            total += rows[j].topic_len
            ok[j] = 1
        off[j + 1] = <int32_t>total
    text = PyBytes_FromStringAndSize(NULL, total)
    cdef char *w = PyBytes_AS_STRING(text)
    for j in range(n):
        if rows[j].topic != NULL:
            memcpy(w + off[j], rows[j].topic, rows[j].topic_len)
    return offsets, text, valid


cdef tuple topic_id_column(PartRow *rows, Py_ssize_t n):
    """Topic ids as canonical UUID text; absent ones and the all-zero id (no id) null."""
    cdef Py_ssize_t j, total = 0
    cdef const unsigned char *p
    cdef int k, w
    offsets = np.zeros(n + 1, np.int32)
    valid = np.zeros(n, np.bool_)
    cdef int32_t[::1] off = offsets
    cdef uint8_t[::1] ok = valid.view(np.uint8)
    for j in range(n):
        p = rows[j].topic_id
        if p != NULL:
            for k in range(16):
                if p[k]:
                    ok[j] = 1
                    total += 36
                    break
        off[j + 1] = <int32_t>total
    text = PyBytes_FromStringAndSize(NULL, total)
    cdef char *out = PyBytes_AS_STRING(text)
    for j in range(n):
        if not ok[j]:
            continue
        p = rows[j].topic_id
        w = off[j]
        for k in range(16):
            if k == 4 or k == 6 or k == 8 or k == 10:
                out[w] = b'-'
                w += 1
            out[w] = HEX[p[k] >> 4]
            out[w + 1] = HEX[p[k] & 15]
            w += 2
    return offsets, text, valid
