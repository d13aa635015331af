"""Batch decoding: kproto.batch against a plain C loop, kio per frame, and kio + json.dumps.

Figures (issue 6), all ratios measured in the same run:

* header-only decode of 1 M mixed v1/v2 request frames   [>= 100 M frames/s, >= 0.5x the C loop]
* the same against a per-frame loop over kio's header reader            [>= 60x]
* JSON body column of MetadataResponse v12 vs kio decode + json.dumps    [>= 10x]

The C reference loop (benchmarks/c_reference/header_loop.c) is compiled here with
the system C compiler, at benchmark time. Run either way:

    .venv/bin/python benchmarks/bench_batch.py          # prints the figures and ratios
    .venv/bin/python -m pytest benchmarks/bench_batch.py --benchmark-only
"""

from __future__ import annotations

import ctypes
import dataclasses
import json
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import pytest

import kproto.batch as kb
from kproto import api
from kproto import messages as m

kio_serial = pytest.importorskip("kio.serial")
from kio.schema.metadata.v12.response import MetadataResponse as KioMetadataResponse  # noqa: E402
from kio.schema.request_header.v1.header import RequestHeader as KioRequestHeaderV1  # noqa: E402
from kio.schema.request_header.v2.header import RequestHeader as KioRequestHeaderV2  # noqa: E402

HERE = Path(__file__).resolve().parent
FRAMES = 1_000_000
KIO_FRAMES = 50_000   # kio is timed on a slice and scaled: a million would take a minute


def request_frames(count: int) -> tuple[bytes, list[bytes]]:
    """``count`` size-prefixed requests, alternating header v1 and v2 (Metadata v4 / v12, ApiVersions v2 / v3)."""
    kinds = [
        api.encode_request(m.MetadataRequest(topics=None), version=4, correlation_id=0, client_id="consumer-1"),
        api.encode_request(m.MetadataRequest(topics=None), version=12, correlation_id=0, client_id="consumer-1"),
        api.encode_request(m.ApiVersionsRequest(), version=2, correlation_id=0, client_id="producer-7"),
        api.encode_request(m.ApiVersionsRequest(client_software_name="kproto", client_software_version="1"),
                           version=3, correlation_id=0, client_id="producer-7"),
    ]
    payloads = []
    for i in range(count):
        frame = bytearray(kinds[i % len(kinds)])
        struct.pack_into(">i", frame, 4, i)   # distinct correlation ids
        payloads.append(bytes(frame))
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads), payloads


def metadata_response_payload() -> bytes:
    T, P = m.MetadataResponse.MetadataResponseTopic, m.MetadataResponse.MetadataResponsePartition
    B = m.MetadataResponse.MetadataResponseBroker
    body = m.MetadataResponse(
        brokers=[B(node_id=i, host=f"broker-{i}.kafka.internal", port=9092, rack=f"rack-{i}") for i in range(3)],
        cluster_id="Xf3k9cluster", controller_id=1,
        topics=[T(name=f"topic-{t:03d}", topic_id=uuid.UUID(int=t + 1), partitions=[
            P(partition_index=p, leader_id=p % 3, leader_epoch=5, replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
            for p in range(10)]) for t in range(100)])
    return api.encode_response(body, version=12, correlation_id=1)


def build_reference() -> ctypes.CDLL:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler for the reference loop")
    out = Path(tempfile.mkdtemp()) / "header_loop.so"
    subprocess.run([compiler, "-O3", "-shared", "-fPIC", "-o", str(out),
                    str(HERE / "c_reference" / "header_loop.c")], check=True)
    lib = ctypes.CDLL(str(out))
    lib.header_loop.restype = ctypes.c_int64
    return lib


def c_reference_arrays(count: int) -> list[np.ndarray]:
    return [np.empty(count, t) for t in (np.int64, np.int32, np.int16, np.int16, np.int32, np.int16)]


def c_reference_decode(lib: ctypes.CDLL, buf: bytes, count: int, arrays: list[np.ndarray] | None = None) -> int:
    # Fresh output arrays per call, as the batch decoder makes, unless the caller
    # passes arrays to reuse: then the pages are already mapped and warm, which
    # is the loop's floor with no allocation cost at all.
    arrays = c_reference_arrays(count) if arrays is None else arrays
    return lib.header_loop(ctypes.c_char_p(buf), ctypes.c_int64(len(buf)), ctypes.c_int64(count),
                           *[a.ctypes.data_as(ctypes.c_void_p) for a in arrays])


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


def best_of(fn, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


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
    batch = benchmark(kb.decode_frames, buf, directions=1, request_api_keys=3, request_api_versions=12,
                      body="json")
    assert batch["status"].to_numpy().max() == 0


def test_metadata_json_kio(benchmark):
    body = metadata_response_payload()[5:]   # after the v1 response header (correlation id + no tags)
    benchmark(kio_json, [body] * 200)


# ---------------------------------------------------------------- standalone figures
def main() -> None:
    buf, payloads = request_frames(FRAMES)
    lib = build_reference()
    kproto_s = best_of(lambda: kb.decode_frames(buf))
    c_s = best_of(lambda: c_reference_decode(lib, buf, FRAMES))
    reused = c_reference_arrays(FRAMES)
    c_reused_s = best_of(lambda: c_reference_decode(lib, buf, FRAMES, reused))
    kio_s = best_of(lambda: kio_header_loop(payloads[:KIO_FRAMES]), repeat=3) * FRAMES / KIO_FRAMES
    print(f"header-only, {FRAMES:,} mixed v1/v2 request frames ({len(buf) / FRAMES:.1f} B each), "
          f"implementation {kb._batch.IMPLEMENTATION}")
    print(f"  kproto.batch       {kproto_s * 1e3:8.2f} ms  {FRAMES / kproto_s / 1e6:7.1f} M frames/s")
    print(f"  C reference        {c_s * 1e3:8.2f} ms  {FRAMES / c_s / 1e6:7.1f} M frames/s"
          f"   kproto/C rate = {c_s / kproto_s:.2f}")
    print(f"  C, arrays reused   {c_reused_s * 1e3:8.2f} ms  {FRAMES / c_reused_s / 1e6:7.1f} M frames/s"
          f"   kproto/C rate = {c_reused_s / kproto_s:.2f}")
    print(f"  kio per frame      {kio_s * 1e3:8.2f} ms  {FRAMES / kio_s / 1e6:7.3f} M frames/s"
          f"   kproto/kio = {kio_s / kproto_s:.0f}x")

    payload = metadata_response_payload()
    copies = 200
    mbuf = (struct.pack(">i", len(payload)) + payload) * copies
    json_s = best_of(lambda: kb.decode_frames(mbuf, directions=1, request_api_keys=3,
                                              request_api_versions=12, body="json"))
    kio_json_s = best_of(lambda: kio_json([payload[5:]] * copies), repeat=3)
    print(f"JSON body column, MetadataResponse v12 (100 topics x 10 partitions, {len(payload):,} B), {copies} frames")
    print(f"  kproto.batch       {json_s / copies * 1e6:8.1f} us/frame")
    print(f"  kio + json         {kio_json_s / copies * 1e6:8.1f} us/frame   kproto/kio = {kio_json_s / json_s:.1f}x")


if __name__ == "__main__":
    sys.exit(main())
