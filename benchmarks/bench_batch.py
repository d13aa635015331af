"""Batch decoding: kproto.arrow.frames against a plain C loop, kio per frame, and kio + json.dumps.

Figures (issue 6), all ratios measured in the same run:

* header-only decode of 1 M mixed v1/v2 request frames   [>= 100 M frames/s, >= 0.5x the C loop]
* the same against a per-frame loop over kio's header reader            [>= 60x]
* JSON body column of MetadataResponse v12 vs kio decode + json.dumps    [>= 10x]

and, for issue 18, header-only decoding as the number of distinct client ids grows:
1 M mixed v1/v2 requests whose ids are drawn, in random order, uniformly or
Zipf-distributed from 1, 50, 1,000, 10,000 or 100,000 ids, each against the C loop
writing into warm preallocated arrays over the same buffer
[>= 100 M frames/s and >= 0.5x with 50 ids; >= 0.4x with 100,000 Zipf ids],
and against the C loop that also looks each id up in a table already holding
every id of the buffer (the least a hash-table dictionary costs on the machine);
and, for issue 39, with ``client_ids="dictionary"`` (``dictionary_encode`` of the
text) against the default text.

Every figure is a median over repeated runs with its spread (see _timing.py and
docs/benchmarks.md); a ratio is the median of per-round ratios, the sides
timed one after the other in each round.

The C reference loop (benchmarks/c_reference/header_loop.c) is compiled here with
the system C compiler, at benchmark time. Run either way:

    .venv/bin/python benchmarks/bench_batch.py          # prints the figures and ratios
    .venv/bin/python benchmarks/bench_batch.py --only ids --runs 21   # the client-id shapes only
    .venv/bin/python -m pytest benchmarks/bench_batch.py --benchmark-only
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

import kproto.arrow.frames as kb
from kproto import api
from kproto import messages as m

kio_serial = pytest.importorskip("kio.serial")
from kio.schema.metadata.v12.response import MetadataResponse as KioMetadataResponse  # noqa: E402
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # _timing, under pytest too
from _timing import Spread, alternating, paired, per_round, repeat  # noqa: E402

HERE = Path(__file__).resolve().parent
FRAMES = 1_000_000
KIO_FRAMES = 50_000  # kio is timed on a slice and scaled: a million would take a minute


def request_frames(count: int) -> tuple[bytes, list[bytes]]:
    """``count`` size-prefixed requests, alternating header v1 and v2 (Metadata v4 / v12, ApiVersions v2 / v3)."""
    kinds = [
        api.encode_request(m.MetadataRequest(topics=None), version=4, correlation_id=0, client_id="consumer-1"),
        api.encode_request(m.MetadataRequest(topics=None), version=12, correlation_id=0, client_id="consumer-1"),
        api.encode_request(m.ApiVersionsRequest(), version=2, correlation_id=0, client_id="producer-7"),
        api.encode_request(
            m.ApiVersionsRequest(client_software_name="kproto", client_software_version="1"),
            version=3,
            correlation_id=0,
            client_id="producer-7",
        ),
    ]
    payloads = []
    for i in range(count):
        frame = bytearray(kinds[i % len(kinds)])
        struct.pack_into(">i", frame, 4, i)  # distinct correlation ids
        payloads.append(bytes(frame))
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads), payloads


# ---------------------------------------------------------------- many client ids (issue 18)
ID_COUNTS = (1, 50, 1_000, 10_000, 100_000)
ZIPF_EXPONENT = 1.0
ID_SHAPES = [(1, "uniform")] + [(ids, dist) for ids in ID_COUNTS[1:] for dist in ("uniform", "zipf")]


def client_id_name(k: int) -> str:
    """Id number k: short ids (up to 14 bytes) and longer Java-style ones, alternating."""
    return f"producer-{k}" if k % 2 == 0 else f"consumer-orders-{k}"


def id_draws(count: int, ids: int, distribution: str, seed: int = 18) -> np.ndarray:
    """Which id each of ``count`` frames carries: uniform, or Zipf over ``ids`` (rank r has
    weight 1 / r ** ZIPF_EXPONENT, ranks given to ids at random); random order either way."""
    rng = np.random.default_rng(seed)
    if distribution == "uniform":
        return rng.integers(0, ids, count)
    weights = 1.0 / np.arange(1, ids + 1) ** ZIPF_EXPONENT
    ranks = rng.choice(ids, size=count, p=weights / weights.sum())
    return rng.permutation(ids)[ranks]


def id_shape_frames(count: int, ids: int, distribution: str) -> bytes:
    """``count`` size-prefixed requests of request_frames' four kinds (header v1 and v2 in turn),
    with client ids drawn by id_draws and distinct correlation ids."""
    return frames_with_ids(id_draws(count, ids, distribution).tolist())


def frames_with_ids(id_numbers: list[int]) -> bytes:
    """One size-prefixed request per entry, frame i carrying id number id_numbers[i]
    (client_id_name), of request_frames' four kinds in turn, with distinct correlation ids."""
    # Each kind split around its (empty) client id: api key and version | correlation id | the rest.
    templates = []
    for frame in request_frames(4)[1]:
        assert frame[8:10] == b"\x00\x0a"  # "consumer-1" / "producer-7"
        templates.append((frame[:4], frame[20:]))
    names: dict[int, bytes] = {}
    parts = []
    for i, k in enumerate(id_numbers):
        head, rest = templates[i % 4]
        name = names.get(k)
        if name is None:
            raw = client_id_name(k).encode()
            name = names[k] = struct.pack(">h", len(raw)) + raw
        parts.append(struct.pack(">i", 8 + len(name) + len(rest)) + head + struct.pack(">i", i) + name + rest)
    return b"".join(parts)


def metadata_response_payload() -> bytes:
    T, P = m.MetadataResponse.MetadataResponseTopic, m.MetadataResponse.MetadataResponsePartition
    B = m.MetadataResponse.MetadataResponseBroker
    body = m.MetadataResponse(
        brokers=[B(node_id=i, host=f"broker-{i}.kafka.internal", port=9092, rack=f"rack-{i}") for i in range(3)],
        cluster_id="Xf3k9cluster",
        controller_id=1,
        topics=[
            T(
                name=f"topic-{t:03d}",
                topic_id=uuid.UUID(int=t + 1),
                partitions=[
                    P(partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
                    for p in range(10)
                ],
            )
            for t in range(100)
        ],
    )
    return api.encode_response(body, version=12, correlation_id=1)


def build_reference() -> ctypes.CDLL:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the reference loop")
    out = Path(tempfile.mkdtemp()) / "header_loop.so"
    subprocess.run(
        [compiler, "-O3", "-shared", "-fPIC", "-o", str(out), str(HERE / "c_reference" / "header_loop.c")], check=True
    )
    lib = ctypes.CDLL(str(out))
    for name in ("header_loop", "header_loop_ids", "id_table_fill"):
        getattr(lib, name).restype = ctypes.c_int64
    return lib


def c_reference_arrays(count: int) -> list[np.ndarray]:
    return [np.empty(count, t) for t in (np.int64, np.int32, np.int16, np.int16, np.int32, np.int16)]


def c_reference_decode(lib: ctypes.CDLL, buf: bytes, count: int, arrays: list[np.ndarray] | None = None) -> int:
    # Fresh output arrays per call, as the batch decoder makes, unless the caller
    # passes arrays to reuse: then the pages are already mapped and warm, which
    # is the loop's floor with no allocation cost at all.
    arrays = c_reference_arrays(count) if arrays is None else arrays
    return lib.header_loop(
        ctypes.c_char_p(buf),
        ctypes.c_int64(len(buf)),
        ctypes.c_int64(count),
        *[a.ctypes.data_as(ctypes.c_void_p) for a in arrays],
    )


def table_slots(ids: int) -> int:
    """The slots of an open-addressing table holding ``ids`` ids: 256, grown 4x whenever
    the ids would fill more than five eighths of them (the table kproto's header loop
    kept for dictionaries until issue 39)."""
    slot_count = 256
    while 8 * ids > 5 * slot_count:
        slot_count <<= 2
    return slot_count


class CLookupLoop:
    """The C loop that also turns each frame's id into its dictionary index through a
    table already holding every id of ``buf`` (header_loop_ids): the least a hash-table
    dictionary costs a frame, nothing added or checked. Its slots are table_slots(distinct)
    unless ``slot_count`` says otherwise."""

    def __init__(self, lib: ctypes.CDLL, buf: bytes, distinct: int, slot_count: int | None = None):
        if slot_count is None:
            slot_count = table_slots(distinct)
        self.slots = np.full((slot_count, 4), np.iinfo(np.uint64).max, dtype=np.uint64)
        self.shift = 64 - (slot_count.bit_length() - 1)
        self.lib, self.buf = lib, buf
        filled = lib.id_table_fill(
            ctypes.c_char_p(buf),
            ctypes.c_int64(len(buf)),
            self.slots.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(self.shift),
        )
        assert filled == distinct, (filled, distinct)
        # The C loop's columns, the last holding each id's index instead of its length.
        self.arrays = c_reference_arrays(FRAMES)[:5] + [np.empty(FRAMES, np.int32)]

    def __call__(self) -> int:
        return self.lib.header_loop_ids(
            ctypes.c_char_p(self.buf),
            ctypes.c_int64(len(self.buf)),
            ctypes.c_int64(FRAMES),
            *[a.ctypes.data_as(ctypes.c_void_p) for a in self.arrays],
            self.slots.ctypes.data_as(ctypes.c_void_p),
            ctypes.c_int(self.shift),
        )

    def client_ids(self) -> np.ndarray:
        return self.arrays[5]


KIO_V1 = kio_serial.entity_reader(KioRequestHeaderV1)
KIO_V2 = kio_serial.entity_reader(KioRequestHeaderV2)


def kio_header_loop(payloads: list[bytes]) -> int:
    n = 0
    for payload in payloads:
        version = (payload[2] << 8) | payload[3]
        reader = KIO_V2 if (payload[1] == 3 and version >= 9) or (payload[1] == 18 and version >= 3) else KIO_V1
        reader(payload, 0)
        n += 1
    return n


KIO_METADATA = kio_serial.entity_reader(KioMetadataResponse)


def _plain(value):
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    return str(value)


def kio_json(bodies: list[bytes]) -> list[str]:
    return [json.dumps(_plain(KIO_METADATA(body, 0)[0])) for body in bodies]


# ---------------------------------------------------------------- pytest-benchmark
@pytest.fixture(scope="module")
def frames():
    return request_frames(FRAMES)


def test_header_batch_kproto(benchmark, frames):
    buf, _ = frames
    batch = benchmark(kb.decode_frames, buf)
    assert batch.num_rows == FRAMES


def test_header_c_reference(benchmark, frames):
    buf, _ = frames
    lib = build_reference()
    assert benchmark(c_reference_decode, lib, buf, FRAMES) == FRAMES


def test_header_c_reference_arrays_reused(benchmark, frames):
    buf, _ = frames
    lib = build_reference()
    reused = c_reference_arrays(FRAMES)
    assert benchmark(c_reference_decode, lib, buf, FRAMES, reused) == FRAMES


def test_header_kio_per_frame(benchmark, frames):
    _, payloads = frames
    assert benchmark(kio_header_loop, payloads[:KIO_FRAMES]) == KIO_FRAMES


def test_metadata_json_kproto(benchmark):
    payload = metadata_response_payload()
    buf = (struct.pack(">i", len(payload)) + payload) * 200
    batch = benchmark(kb.decode_frames, buf, directions=1, request_api_keys=3, request_api_versions=12, body="json")
    assert batch["status"].to_numpy().max() == 0


def test_metadata_json_kio(benchmark):
    body = metadata_response_payload()[5:]  # after the v1 response header (correlation id + no tags)
    benchmark(kio_json, [body] * 200)


_id_frames_cache: dict[tuple[int, str], bytes] = {}


@pytest.fixture(params=ID_SHAPES, ids=[f"{ids}-{dist}" for ids, dist in ID_SHAPES])
def id_frames(request):
    if request.param not in _id_frames_cache:
        _id_frames_cache.clear()  # one shape's megabytes at a time
        _id_frames_cache[request.param] = id_shape_frames(FRAMES, *request.param)
    return _id_frames_cache[request.param]


def test_header_ids_kproto(benchmark, id_frames):
    batch = benchmark(kb.decode_frames, id_frames)
    assert batch.num_rows == FRAMES


def test_header_ids_kproto_dictionary(benchmark, id_frames):
    batch = benchmark(kb.decode_frames, id_frames, client_ids="dictionary")
    assert batch.num_rows == FRAMES and batch["client_id"].type == pa.dictionary(pa.int32(), pa.string())


def test_header_ids_c_reference_arrays_reused(benchmark, id_frames):
    lib = build_reference()
    reused = c_reference_arrays(FRAMES)
    assert benchmark(c_reference_decode, lib, id_frames, FRAMES, reused) == FRAMES


def test_header_ids_c_lookup(benchmark, id_frames):
    distinct = kb.decode_frames(id_frames, client_ids="dictionary")["client_id"].dictionary
    assert benchmark(CLookupLoop(build_reference(), id_frames, len(distinct))) == FRAMES


# ---------------------------------------------------------------- standalone figures
def rate(spread: Spread) -> str:
    """Seconds per 1 M-frame call as M frames/s: median [IQR] (min-max)."""
    return spread.map(lambda s: FRAMES / s / 1e6).show(digits=1)


def header_figures(runs: int) -> None:
    buf, payloads = request_frames(FRAMES)
    lib = build_reference()
    reused = c_reference_arrays(FRAMES)
    decode = lambda: kb.decode_frames(buf)  # noqa: E731
    print(
        f"header-only, {FRAMES:,} mixed v1/v2 request frames ({len(buf) / FRAMES:.1f} B each, 2 client ids), "
        f"implementation {kb._batch.IMPLEMENTATION}, {runs} runs: median [IQR] (min-max)"
    )
    kproto_s, c_s, c_ratio = paired(decode, lambda: c_reference_decode(lib, buf, FRAMES), runs)
    _, warm_s, warm_ratio = paired(decode, lambda: c_reference_decode(lib, buf, FRAMES, reused), runs)
    kio_runs = max(3, runs // 5)
    kio_s = repeat(lambda: kio_header_loop(payloads[:KIO_FRAMES]), kio_runs).map(lambda s: s * FRAMES / KIO_FRAMES)
    print(f"  kproto.arrow.frames       {rate(kproto_s)} M frames/s")
    print(f"  C reference        {rate(c_s)} M frames/s   kproto/C rate {c_ratio.show()}")
    print(f"  C, arrays reused   {rate(warm_s)} M frames/s   kproto/C rate {warm_ratio.show()}")
    print(
        f"  kio per frame      {rate(kio_s)} M frames/s   ({kio_runs} runs of {KIO_FRAMES:,} frames, scaled)"
        f"   kproto/kio = {kio_s.median / kproto_s.median:.0f}x (medians)"
    )


def id_figures(runs: int) -> None:
    lib = build_reference()
    reused = c_reference_arrays(FRAMES)
    print(
        f"header-only, {FRAMES:,} mixed v1/v2 request frames by client ids (uniform or Zipf s={ZIPF_EXPONENT}), "
        f"vs the C loop into warm arrays and the C loop that also looks each id up in a table already "
        f"holding them all; 'dictionary' is kproto with client_ids=\"dictionary\" (dictionary_encode of the text), "
        f"{runs} runs: median [IQR] (min-max)"
    )
    print(
        f"  {'ids':>7} {'draw':8} {'distinct':>8}  {'kproto M frames/s':34} {'C warm M frames/s':34} "
        f"{'kproto/C rate':32} {'C lookup M frames/s':34} {'C-lookup/C rate':32} "
        f"{'dictionary M frames/s':34} {'dictionary/kproto rate':32} dictionary/C-lookup rate"
    )
    for ids, distribution in ID_SHAPES:
        buf = id_shape_frames(FRAMES, ids, distribution)
        distinct = len(np.unique(id_draws(FRAMES, ids, distribution)))
        lookup = CLookupLoop(lib, buf, distinct)
        kproto_s, warm_s, lookup_s, dict_s = alternating(
            [
                lambda buf=buf: kb.decode_frames(buf),
                lambda buf=buf: c_reference_decode(lib, buf, FRAMES, reused),
                lookup,
                lambda buf=buf: kb.decode_frames(buf, client_ids="dictionary"),
            ],
            runs,
        )
        print(
            f"  {ids:>7,} {distribution:8} {distinct:>8,}  {rate(kproto_s):34} {rate(warm_s):34} "
            f"{per_round(kproto_s, warm_s).show():32} {rate(lookup_s):34} {per_round(lookup_s, warm_s).show():32} "
            f"{rate(dict_s):34} {per_round(dict_s, kproto_s).show():32} {per_round(dict_s, lookup_s).show()}",
            flush=True,
        )


def test_c_lookup_loop_gives_the_dictionary_indexes():
    """The C lookup loop is a peer only if it does the work: its indexes are kproto's."""
    lib = build_reference()
    for ids, distribution in ((1, "uniform"), (3_000, "zipf")):
        buf = id_shape_frames(FRAMES, ids, distribution)
        lookup = CLookupLoop(lib, buf, len(np.unique(id_draws(FRAMES, ids, distribution))))
        assert lookup() == FRAMES
        indexes = kb.decode_frames(buf, client_ids="dictionary")["client_id"].indices.to_numpy()
        assert (lookup.client_ids() == indexes).all()


def json_figures(runs: int) -> None:
    payload = metadata_response_payload()
    copies = 200
    mbuf = (struct.pack(">i", len(payload)) + payload) * copies
    json_s = repeat(
        lambda: kb.decode_frames(mbuf, directions=1, request_api_keys=3, request_api_versions=12, body="json"), runs
    )
    kio_runs = max(3, runs // 5)
    kio_json_s = repeat(lambda: kio_json([payload[5:]] * copies), kio_runs)
    print(f"JSON body column, MetadataResponse v12 (100 topics x 10 partitions, {len(payload):,} B), {copies} frames")
    print(f"  kproto.arrow.frames       {json_s.show(1e6 / copies, 1)} us/frame ({runs} runs)")
    print(
        f"  kio + json         {kio_json_s.show(1e6 / copies, 1)} us/frame ({kio_runs} runs)"
        f"   kproto/kio = {kio_json_s.median / json_s.median:.1f}x (medians)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="timed runs per figure (default 15)")
    parser.add_argument(
        "--only",
        choices=("headers", "ids", "json"),
        action="append",
        help="run only these groups of figures (repeatable)",
    )
    args = parser.parse_args()
    groups = args.only or ["headers", "ids", "json"]
    if "headers" in groups:
        header_figures(args.runs)
    if "ids" in groups:
        id_figures(args.runs)
    if "json" in groups:
        json_figures(args.runs)


if __name__ == "__main__":
    sys.exit(main())
