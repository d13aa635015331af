"""The exceptions kproto raises.

Every decoding problem is a :class:`DecodeError` that says *where* it happened:
the message and version being read (when known), the field path inside it
(``MetadataResponse.topics[3].partitions[0].isr_nodes``) and the byte offset
from the start of the buffer handed to the decoder.
"""

from __future__ import annotations

from kproto._common.error_codes import ERROR_CODES

__all__ = [
    "KprotoError",
    "DecodeError",
    "TruncatedError",
    "InvalidLengthError",
    "InvalidVarintError",
    "FrameTooLargeError",
    "LimitExceededError",
    "UnsupportedVersionError",
    "UnsupportedRequestError",
    "EncodeError",
]


class KprotoError(Exception):
    """Base class of every error kproto raises on purpose."""


class DecodeError(KprotoError, ValueError):
    """Bytes that cannot be read as the expected Kafka structure.

    Attributes:
        reason: what is wrong, without the location.
        offset: byte offset into the decoded buffer where the problem starts.
        path: dotted field path (``Message.field[3].sub``), or None.
        api_key, api_version: the API being decoded, when known.
    """

    def __init__(
        self,
        reason: str,
        offset: int | None = None,
        path: str | None = None,
        api_key: int | None = None,
        api_version: int | None = None,
    ) -> None:
        self.reason = reason
        self.offset = offset
        self.path = path
        self.api_key = api_key
        self.api_version = api_version
        super().__init__(self._describe())

    def _describe(self) -> str:
        where = []
        if self.api_key is not None:
            where.append(f"api_key={self.api_key}")
        if self.api_version is not None:
            where.append(f"v{self.api_version}")
        if self.path:
            where.append(f"at {self.path}")
        if self.offset is not None:
            where.append(f"byte offset {self.offset}")
        return f"{self.reason} ({', '.join(where)})" if where else self.reason

    def __reduce__(self):  # keep errors picklable (Spark ships them between processes)
        return (type(self), (self.reason, self.offset, self.path, self.api_key, self.api_version))


class TruncatedError(DecodeError):
    """The buffer ends before the value being read does."""


class InvalidLengthError(DecodeError):
    """A length or element count is negative (and not the null marker) or larger than the bytes left."""


class InvalidVarintError(DecodeError):
    """A varint runs past its maximum width (5 bytes for 32-bit, 10 for 64-bit)."""


class FrameTooLargeError(DecodeError):
    """A size prefix announces a frame above the configured maximum."""


class LimitExceededError(DecodeError):
    """A configured safety limit (nesting depth, decompressed size, ...) was exceeded."""


class UnsupportedVersionError(DecodeError):
    """The API key or version has no schema in kproto.

    ``header`` holds the request or response header that was read before the body,
    when there was one, so callers can still report who sent what.
    """

    def __init__(self, reason, offset=None, path=None, api_key=None, api_version=None, header=None):
        self.header = header
        super().__init__(reason, offset, path, api_key, api_version)

    def __reduce__(self):
        return (type(self), (self.reason, self.offset, self.path, self.api_key, self.api_version, self.header))


class UnsupportedRequestError(DecodeError):
    """A response frame that holds only a correlation id.

    Old brokers answer a request they do not understand this way (KIP-35), and
    some close the connection instead; either way the body is empty, not truncated.
    """


class EncodeError(KprotoError, ValueError):
    """A value that cannot be written: out of range, too long, or null where the field is not nullable."""

    def __init__(
        self, reason: str, path: str | None = None, api_key: int | None = None, api_version: int | None = None
    ) -> None:
        self.reason = reason
        self.path = path
        self.api_key = api_key
        self.api_version = api_version
        where = []
        if api_key is not None:
            where.append(f"api_key={api_key}")
        if api_version is not None:
            where.append(f"v{api_version}")
        if path:
            where.append(f"at {path}")
        super().__init__(f"{reason} ({', '.join(where)})" if where else reason)

    def __reduce__(self):
        return (type(self), (self.reason, self.path, self.api_key, self.api_version))


# ---- record batches (kproto.records, kproto.compression) ----
# Shared by both implementations of kproto.records and by kproto.compression,
# so they live here rather than in either twin.


class CorruptRecordError(DecodeError):
    """A record batch or legacy message whose bytes contradict themselves.

    ``base_offset`` is the Kafka offset of the batch (or legacy message) it was
    found in, when known, so operators can find the batch on the broker.
    """

    def __init__(self, reason, offset=None, path=None, api_key=None, api_version=None, base_offset=None):
        self.base_offset = base_offset
        if base_offset is not None and "base offset" not in reason:
            reason = f"{reason} [batch base offset {base_offset}]"
        super().__init__(reason, offset, path, api_key, api_version)

    def __reduce__(self):
        return (type(self), (self.reason, self.offset, self.path, self.api_key, self.api_version, self.base_offset))


class CrcMismatchError(CorruptRecordError):
    """The checksum stored in a batch (CRC-32C) or legacy message (CRC-32) does not match its bytes."""

    def __init__(
        self,
        reason,
        offset=None,
        path=None,
        api_key=None,
        api_version=None,
        base_offset=None,
        stored_crc=None,
        computed_crc=None,
    ):
        self.stored_crc = stored_crc
        self.computed_crc = computed_crc
        super().__init__(reason, offset, path, api_key, api_version, base_offset)

    def __reduce__(self):
        return (
            type(self),
            (
                self.reason,
                self.offset,
                self.path,
                self.api_key,
                self.api_version,
                self.base_offset,
                self.stored_crc,
                self.computed_crc,
            ),
        )


class DecompressionError(CorruptRecordError):
    """Compressed record data that the codec rejects (or an unknown codec)."""


class DecompressedSizeError(DecompressionError, LimitExceededError):
    """Decompressed record data would exceed the configured cap (a compression bomb, or a cap set too low)."""


class TooManyRecordsError(CorruptRecordError, LimitExceededError):
    """A batch (``max_records_per_batch``) or record set (``max_records_per_set``) holds too many records."""


class CodecUnavailableError(KprotoError, ImportError):
    """A compression codec whose package is not installed (snappy, lz4 and zstd need cramjam).

    Not a DecodeError: the data may well be fine, this installation cannot read (or
    write) it, so code that skips corrupt batches does not skip these. An ImportError
    too (``name`` is the missing package), as a missing optional package is.
    Attributes: ``codec`` (``"zstd"``), ``package`` (``"cramjam"``).
    """

    def __init__(self, codec: str, package: str = "cramjam") -> None:
        from kproto._extras import install_hint

        self.codec = codec
        self.package = package
        super().__init__(
            f"{codec} needs the {package} package, which is not installed: {install_hint('compression')}", name=package
        )

    def __reduce__(self):
        return (type(self), (self.codec, self.package))


__all__ += [
    "CorruptRecordError",
    "CrcMismatchError",
    "DecompressionError",
    "DecompressedSizeError",
    "TooManyRecordsError",
    "CodecUnavailableError",
]


# ---------------------------------------------------------------- protocol error codes
class ErrorCode:
    """A Kafka protocol error code: ``ErrorCode.by_code(35).name == "UNSUPPORTED_VERSION"``."""

    __slots__ = ("code", "name", "retriable")
    _by_code: dict[int, ErrorCode] = {}
    _by_name: dict[str, ErrorCode] = {}

    def __init__(self, code: int, name: str, retriable: bool) -> None:
        self.code = code
        self.name = name
        self.retriable = retriable

    def __repr__(self) -> str:
        return f"ErrorCode({self.code}, {self.name!r}, retriable={self.retriable})"

    @classmethod
    def by_code(cls, code: int) -> ErrorCode:
        """The error with this code; unknown codes get a placeholder named UNKNOWN_CODE_<n>."""
        found = cls._by_code.get(code)
        return found if found is not None else ErrorCode(code, f"UNKNOWN_CODE_{code}", False)

    @classmethod
    def by_name(cls, name: str) -> ErrorCode:
        return cls._by_name[name]

    @classmethod
    def all(cls) -> list[ErrorCode]:
        return sorted(cls._by_code.values(), key=lambda e: e.code)


def _load_error_codes() -> None:
    for code, name, retriable in ERROR_CODES:
        entry = ErrorCode(code, name, retriable)
        ErrorCode._by_code[code] = entry
        ErrorCode._by_name[name] = entry


_load_error_codes()


def error_name(code: int) -> str:
    """Name of a protocol error code (``0`` is ``NONE``)."""
    return ErrorCode.by_code(code).name


def is_retriable(code: int) -> bool:
    """Whether Kafka treats the error as retriable (a RetriableException in the Java client)."""
    return ErrorCode.by_code(code).retriable


__all__ += ["ErrorCode", "error_name", "is_retriable"]


# ---- captures (kproto.arrow.capture) ----


class CorruptCaptureError(DecodeError):
    """A capture file whose record framing breaks: reading stops at ``offset``.

    ``category`` says why, as the capture tables name it: ``not_a_capture``,
    ``oversized_record`` or ``bad_block`` (see ``kproto.arrow.capture.ERROR_CATEGORIES``).
    """

    def __init__(self, reason, offset=None, path=None, api_key=None, api_version=None, category=None):
        self.category = category
        super().__init__(reason, offset, path, api_key, api_version)

    def __reduce__(self):
        return (type(self), (self.reason, self.offset, self.path, self.api_key, self.api_version, self.category))


__all__ += ["CorruptCaptureError"]
