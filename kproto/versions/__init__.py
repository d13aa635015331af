"""Version negotiation and the Kafka 4.x baseline.

Everything here is derived, at import time, from the generated protocol facts in
:mod:`kproto.schema._messages` (``MESSAGES`` and ``BROKER_API_VERSIONS``) and the answers
of real brokers in :mod:`kproto.broker_recordings` (3.9 and 4.x, see :func:`broker_api_versions`):

* :func:`api_table` / :func:`api_info`: every API kproto has a schema for, with its
  version range, first flexible version, the versions KIP-896 marked deprecated and
  the versions Kafka 4.x really removed;
* :data:`RELEASES` / :func:`release_table`: what each Apache Kafka broker release
  from 0.8.0 to 4.4 advertises in its ApiVersionsResponse;
* :func:`negotiate`: the highest version a client and a broker (or every broker of
  a cluster, KIP-35) both speak, raising :class:`ObsoleteBrokerVersion` (KIP-97)
  when an API the caller requires has none;
* :func:`check_features`: which client features (sets of API version requirements)
  a broker or a cluster can serve;
* :func:`infer_release`: which release(s) an ApiVersionsResponse matches;
* :class:`ApiVersionsHandshake` / :func:`handshake`: the KIP-511 ApiVersions
  exchange with its UNSUPPORTED_VERSION fallback, and the ClientSoftwareName /
  ClientSoftwareVersion validation;
* :func:`version_info`: for one (API, version), whether it is deprecated, removed
  in 4.x, and which releases serve it.

Ranges are plain ``{api_key: (min_version, max_version)}`` dicts throughout; every
function that takes ranges also accepts an ApiVersionsResponse (body or decoded
:class:`kproto.Response`), a release name such as ``"3.9"``, or ``(key, min, max)`` rows.
"""

from __future__ import annotations

# The names marked noqa: F401 are read from here too (by the CLI, the tools and the tests), though not in __all__.
from kproto.versions._handshake import (
    CLIENT_SOFTWARE_PATTERN,
    DEFAULT_CLIENT_SOFTWARE_NAME,  # noqa: F401
    DEFAULT_CLIENT_SOFTWARE_VERSION,  # noqa: F401
    ApiVersionsError,
    ApiVersionsHandshake,
    HandshakeResult,
    InvalidClientSoftwareError,
    api_versions_request,
    client_software_problems,
    decode_api_versions_request,
    encode_api_versions_request,
    handshake,
    retry_version,
    socket_exchange,
)
from kproto.versions._negotiate import (
    FeatureCheck,
    ObsoleteBrokerVersion,
    RangesLike,  # noqa: F401
    as_ranges,
    baseline_4x,
    check_features,
    cluster_ranges,
    negotiate,
    usable_version,
)
from kproto.versions._releases import (
    ReleaseChange,
    ReleaseMatch,
    VersionInfo,
    format_releases,
    infer_release,
    release_changes,
    version_info,
)
from kproto.versions._tables import (
    ADVERTISED_BUT_REJECTED,
    API_VERSIONS_KEY,  # noqa: F401
    INVALID_REQUEST,  # noqa: F401
    KNOWN_UNKNOWN_API_KEYS,
    RECORDED_FROM,
    RELEASES,
    UNSUPPORTED_VERSION,  # noqa: F401
    ApiInfo,
    Ranges,
    api_info,
    api_key_of,
    api_label,
    api_name,
    api_table,
    broker_api_versions,
    kproto_ranges,
    release_mode,
    release_table,
    releases_between,
    resolve_release,
    zookeeper_mode_table,
)

# In the order the reference page (docs/reference/versions.md) shows them.
__all__ = [
    "Ranges",
    "RECORDED_FROM",
    "broker_api_versions",
    "zookeeper_mode_table",
    "release_mode",
    "RELEASES",
    "resolve_release",
    "release_table",
    "releases_between",
    "KNOWN_UNKNOWN_API_KEYS",
    "ApiInfo",
    "api_table",
    "api_key_of",
    "api_info",
    "api_name",
    "api_label",
    "kproto_ranges",
    "ADVERTISED_BUT_REJECTED",
    "VersionInfo",
    "format_releases",
    "version_info",
    "ObsoleteBrokerVersion",
    "as_ranges",
    "cluster_ranges",
    "usable_version",
    "baseline_4x",
    "negotiate",
    "FeatureCheck",
    "check_features",
    "ReleaseMatch",
    "infer_release",
    "ReleaseChange",
    "release_changes",
    "CLIENT_SOFTWARE_PATTERN",
    "client_software_problems",
    "InvalidClientSoftwareError",
    "ApiVersionsError",
    "api_versions_request",
    "encode_api_versions_request",
    "decode_api_versions_request",
    "retry_version",
    "HandshakeResult",
    "ApiVersionsHandshake",
    "handshake",
    "socket_exchange",
]

# The names live in private modules by job; they are shown (repr, tracebacks, pickles) where they are used from.
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", "").startswith(__name__ + "._"):
        _obj.__module__ = __name__
del _name, _obj
