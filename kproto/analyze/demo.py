"""A short tour: build requests and responses, encode them to frames, decode them back.

Run with ``python -m kproto.analyze.demo``. (The capture analysis job replaces this as
the project's main job once the Spark pipeline lands.)
"""

from __future__ import annotations

import json
import uuid
from typing import cast

import kproto
from kproto import ApiKey
from kproto.messages import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse


def show(title: str, frame: bytes, decoded) -> None:
    print(f"--- {title}: {len(frame)} bytes")
    print("    " + frame[:48].hex(" ") + (" ..." if len(frame) > 48 else ""))
    print("    " + json.dumps(decoded.body.to_dict())[:300])


def main() -> None:
    print(f"kproto {kproto.__version__} ({'Cython' if kproto.extension_loaded() else 'pure Python'})")
    request = ApiVersionsRequest(client_software_name="kproto-demo", client_software_version="0.1")
    frame = kproto.encode_request(request, version=3, correlation_id=1, client_id="demo")
    show("ApiVersionsRequest v3", frame, kproto.decode_request(frame))

    response = ApiVersionsResponse(
        api_keys=[
            ApiVersionsResponse.ApiVersion(api_key=key, min_version=0, max_version=3)
            for key in (ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.METADATA, ApiKey.API_VERSIONS)
        ]
    )
    frame = kproto.encode_response(response, version=3, correlation_id=1)
    show("ApiVersionsResponse v3", frame, kproto.decode_response(frame, ApiKey.API_VERSIONS, 3))

    # A broker that does not know v5 answers UNSUPPORTED_VERSION with a v0 body (KIP-511).
    fallback = kproto.encode_response(
        ApiVersionsResponse(
            error_code=35,
            api_keys=[ApiVersionsResponse.ApiVersion(api_key=ApiKey.API_VERSIONS, min_version=0, max_version=2)],
        ),
        version=0,
        correlation_id=2,
    )
    decoded = kproto.decode_response(fallback, ApiKey.API_VERSIONS, 5)
    print(
        f"--- ApiVersions v5 answered with error 35: read as v{decoded.api_version}, "
        f"broker max ApiVersions = {cast(ApiVersionsResponse, decoded.body).api_keys[0].max_version}"
    )

    frame = kproto.encode_request(
        MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="orders")]),
        version=12,
        correlation_id=3,
        client_id="demo",
    )
    show("MetadataRequest v12", frame, kproto.decode_request(frame))
    topic = MetadataResponse.MetadataResponseTopic(
        name="orders",
        topic_id=uuid.UUID(int=0x1234),
        partitions=[
            MetadataResponse.MetadataResponsePartition(
                partition_index=i, leader_id=1, replica_nodes=[1, 2, 3], isr_nodes=[1, 2]
            )
            for i in range(3)
        ],
    )
    frame = kproto.encode_response(
        MetadataResponse(topics=[topic], cluster_id="demo-cluster"), version=12, correlation_id=3
    )
    show("MetadataResponse v12", frame, kproto.decode_response(frame, ApiKey.METADATA, 12))

    try:
        kproto.decode_response(frame[:40], ApiKey.METADATA, 12)
    except kproto.DecodeError as exc:
        print(f"--- truncated MetadataResponse: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
