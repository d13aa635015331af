"""Kafka message schemas as data: lookup, message classes, and per-version plans.

The generated module ``_messages`` holds the protocol facts. This module turns
them into two things, lazily and once per process:

* a **class** per message (and per nested struct) whose attributes are the union
  of the fields of every version, so one object type serves all versions;
* a **plan** per (message, version): the fields present in that version, in wire
  order, with nullability, compactness and tags resolved. Both codec
  implementations (Cython and pure Python) walk the very same plans.
"""

from __future__ import annotations

import base64
import uuid as _uuid
from functools import cache
from typing import Any, cast

from kproto import _impl
from kproto._common.api_keys import REQUEST_HEADER_V0, RESPONSE_HEADER_V0_APIS
from kproto._common.error_codes import ERROR_CODES
from kproto.errors import EncodeError, UnsupportedVersionError
from kproto.schema._lookup import (
    MESSAGES,
    api_keys,
    request_name,
    response_name,
    spec,
)
from kproto.schema._lookup import (
    REQUESTS as _REQUESTS,
)
from kproto.schema._lookup import (
    RESPONSES as _RESPONSES,
)
from kproto.schema._messages import ALIASES, BROKER_API_VERSIONS, OPEN

__all__ = [
    "MESSAGES",
    "ALIASES",
    "ERROR_CODES",
    "BROKER_API_VERSIONS",
    "OPEN",
    "Message",
    "FieldOp",
    "StructPlan",
    "spec",
    "message_class",
    "plan",
    "request_name",
    "response_name",
    "api_keys",
    "api_plan",
    "header_version",
    "is_flexible",
    "definition_origin",
    "is_unstable",
    "KIND_NAMES",
]

# Field kinds shared by both implementations (kproto/_c/_codec.pyx mirrors these numbers).
BOOL, INT8, INT16, INT32, INT64, UINT16, UINT32, FLOAT64, UUID, STRING, BYTES, RECORDS, STRUCT, ARRAY = range(1, 15)
KIND_OF_TYPE = {
    "bool": BOOL,
    "int8": INT8,
    "int16": INT16,
    "int32": INT32,
    "int64": INT64,
    "uint16": UINT16,
    "uint32": UINT32,
    "float64": FLOAT64,
    "uuid": UUID,
    "string": STRING,
    "bytes": BYTES,
    "records": RECORDS,
}
KIND_NAMES = {v: k for k, v in KIND_OF_TYPE.items()} | {STRUCT: "struct", ARRAY: "array"}

# Field tuple positions in _messages (the layout is written once, in _shapes).
from kproto.schema._shapes import (  # noqa: E402
    F_CHILDREN,
    F_DEFAULT,
    F_FLEXIBLE,
    F_IGNORABLE,
    F_NAME,
    F_NULLABLE,
    F_STRUCT,
    F_TAG,
    F_TAGGED,
    F_TYPE,
    F_VERSIONS,
)

ZERO_UUID = _uuid.UUID(int=0)


def _in(version: int, versions: tuple[int, int] | None) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


# ------------------------------------------------------------------ lookup
def is_flexible(name: str, version: int) -> bool:
    return _in(version, spec(name)["flexible_versions"])


def definition_origin(name: str, version: int) -> str:
    """Where the definition of a message's version was taken from: the Kafka release
    whose kafka-clients jar defines it newest ("4.4.0"), or "shared/message" /
    "shared/message-4x" for a version no release jar defines. KeyError: no such version."""
    for versions, origin, _fields in spec(name)["layers"]:
        if versions[0] <= version <= versions[1]:
            return str(origin)
    raise KeyError(f"{name} has no version {version}")


def is_unstable(name: str, version: int) -> bool:
    """True for a version whose definition is marked unstable where it was taken from
    (Kafka's latestVersionUnstable): brokers advertise it only with
    unstable.api.versions.enable, and its layout may still change in a later release."""
    return _in(version, spec(name)["unstable_versions"])


def header_version(api_key: int, api_version: int, is_request: bool) -> int:
    """Header version of a request (0, 1, 2) or response (0, 1) for an API version.

    Flexible versions use the newer header. Two exceptions, in the generated facts of
    kproto._common.api_keys: ApiVersions responses always use header v0, so a client
    can read the error code of a version the broker does not know (KIP-511), and
    ControlledShutdown v0 requests use header v0 (the old client id-less form).
    Unknown APIs get the non-flexible header.
    """
    name = _REQUESTS.get(api_key) if is_request else _RESPONSES.get(api_key)
    flexible = name is not None and _in(api_version, MESSAGES[name]["flexible_versions"])
    if is_request:
        if (api_key, api_version) in REQUEST_HEADER_V0:
            return 0
        return 2 if flexible else 1
    if api_key in RESPONSE_HEADER_V0_APIS:
        return 0
    return 1 if flexible else 0


def api_plan(api_key: int, api_version: int, is_request: bool, *, header: Any = None, offset: int = 0) -> StructPlan:
    """The body plan of a request or response; UnsupportedVersionError (carrying the
    header already read, if any) when kproto has no schema for the API or version."""
    name = request_name(api_key) if is_request else response_name(api_key)
    if name is None:
        raise UnsupportedVersionError(f"unknown api_key {api_key}", offset, None, api_key, api_version, header)
    try:
        return plan(name, api_version)
    except KeyError:
        lo, hi = spec(name)["valid_versions"]
        raise UnsupportedVersionError(
            f"{name} version {api_version} is not supported (kproto knows {lo}-{hi})",
            offset,
            None,
            api_key,
            api_version,
            header,
        ) from None


# ------------------------------------------------------------------ classes
class Message:
    """Base of every generated message and struct class.

    Attributes are the snake_case fields of all versions; fields a version does
    not have keep their default. ``_unknown_tags`` holds tagged fields this
    version of kproto does not know ({tag: raw bytes}), written back on encode.
    """

    __slots__ = ("_unknown_tags",)
    _message_name: str = ""  # top-level message this class belongs to
    _struct_name: str = ""
    _field_names: tuple[str, ...] = ()
    _field_defaults: tuple[Any, ...] = ()
    _field_kinds: tuple[int, ...] = ()
    _field_struct: tuple[Any, ...] = ()  # child class for struct / struct-array fields
    _field_ignorable: tuple[bool, ...] = ()

    def __init__(self, **fields: Any) -> None:
        for name, default, kind, child in zip(
            self._field_names, self._field_defaults, self._field_kinds, self._field_struct
        ):
            if name in fields:
                object.__setattr__(self, name, fields.pop(name))
            else:
                object.__setattr__(self, name, _fresh(default, kind, child))
        self._unknown_tags = fields.pop("_unknown_tags", None)
        if fields:
            unknown = ", ".join(sorted(fields))
            raise TypeError(
                f"{type(self).__name__} has no field(s) {unknown}; fields are: {', '.join(self._field_names)}"
            )

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, n) == getattr(other, n) for n in self._field_names) and (
            self._unknown_tags or None
        ) == (other._unknown_tags or None)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a dataclass with eq

    def __repr__(self) -> str:
        parts = ", ".join(f"{n}={getattr(self, n, '<unset>')!r}" for n in self._field_names)
        if self._unknown_tags:
            parts += f", _unknown_tags={self._unknown_tags!r}"
        return f"{type(self).__name__}({parts})"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly dict: bytes as base64, UUIDs as strings, structs as dicts."""
        out = {n: _plain(getattr(self, n)) for n in self._field_names}
        if self._unknown_tags:
            out["_unknown_tags"] = {
                str(t): base64.b64encode(bytes(v)).decode("ascii") for t, v in sorted(self._unknown_tags.items())
            }
        return out

    @classmethod
    def decode(cls, buf: Any, version: int, *, lazy: bool = True) -> Any:
        """Decode a body of this message at ``version`` from a buffer holding exactly that body.

        The whole body is checked now: bad input raises here, naming the field path and
        offset. With ``lazy`` (the default) the C decoder builds the objects of a struct
        array (a Metadata response's topics, a Fetch response's partitions) when the
        array is first read, so a reader of a few fields pays for those; ``lazy=False``
        builds everything now, in one pass, for a reader of every field (10-13% less
        work than checking first and building on first read). Both give equal objects;
        the pure-Python implementation always builds everything now.
        """
        if cls._struct_name != cls._message_name:
            raise TypeError(f"{cls.__qualname__} is a nested struct; decode its message instead")
        try:
            body_plan = plan(cls._message_name, version)
        except KeyError as exc:
            info = spec(cls._message_name)
            raise UnsupportedVersionError(str(exc.args[0]), 0, None, info["api_key"], version) from None
        return _impl.load("codec").decode_struct(buf, body_plan, lazy=lazy)

    def encode(self, version: int) -> bytes:
        """Encode this message's body (no header) at ``version``."""
        cls = type(self)
        if cls._struct_name != cls._message_name:
            raise TypeError(f"{cls.__qualname__} is a nested struct; encode its message instead")
        try:
            body_plan = plan(cls._message_name, version)
        except KeyError as exc:
            raise EncodeError(str(exc.args[0])) from None
        return cast(bytes, _impl.load("codec").encode_struct(self, body_plan))


def _fresh(default: Any, kind: int, child: Any) -> Any:
    """A new default value: lists and structs must not be shared between objects."""
    if kind == ARRAY:
        return None if default is None else []
    if kind == STRUCT:
        return None if default is None else child()
    return default


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.to_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, _uuid.UUID):
        return str(value)
    if hasattr(value, "__bytes__") and not isinstance(value, (int, float, str)):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def _python_default(field: tuple) -> Any:
    ftype = field[F_TYPE]
    default = field[F_DEFAULT]
    if ftype.startswith("[]") or field[F_STRUCT] is not None:
        return default  # None (null) or () (empty / struct of defaults)
    if ftype == "uuid":
        if default is None:
            return None
        return ZERO_UUID if default == 0 else _uuid.UUID(default)
    return default


def _field_kind(field: tuple) -> int:
    ftype = field[F_TYPE]
    if ftype.startswith("[]"):
        return ARRAY
    if field[F_STRUCT] is not None:
        return STRUCT
    return KIND_OF_TYPE[ftype]


def message_class(name: str) -> type[Message]:
    """The class of a message (or header / data type), with nested struct classes as attributes."""
    return _message_class(ALIASES.get(name, name))


@cache
def _message_class(canonical: str) -> type[Message]:
    info = spec(canonical)
    # Collect, per struct name, the union of fields over every layer (newest layer first).
    structs: dict[str | None, dict[str, tuple]] = {}

    def collect(struct_name: str | None, fields: tuple) -> None:
        bucket = structs.setdefault(struct_name, {})
        for f in fields:
            bucket.setdefault(f[F_NAME], f)
            if f[F_STRUCT] is not None:
                collect(f[F_STRUCT], f[F_CHILDREN])

    for layer in sorted(info["layers"], key=lambda layer: -layer[0][1]):
        collect(None, layer[2])

    classes: dict[str | None, type[Message]] = {}

    from kproto.schema._docs import LazyDoc  # not at import: the module needs this one

    def build(struct_name: str | None) -> type[Message]:
        if struct_name in classes:
            return classes[struct_name]
        fields = list(structs[struct_name].values())
        cls_name = canonical if struct_name is None else struct_name
        # Built at run time: the three-argument type() is typed as a plain ``type``.
        cls = cast(
            "type[Message]",
            type(
                cls_name,
                (Message,),
                {
                    "__slots__": tuple(f[F_NAME] for f in fields),
                    "__module__": "kproto.messages",
                    "__qualname__": cls_name if struct_name is None else f"{canonical}.{struct_name}",
                    "_message_name": canonical,
                    "_struct_name": cls_name,
                    "__doc__": LazyDoc(canonical, struct_name),
                },
            ),
        )
        classes[struct_name] = cls
        cls._field_names = tuple(f[F_NAME] for f in fields)
        cls._field_defaults = tuple(_python_default(f) for f in fields)
        cls._field_kinds = tuple(_field_kind(f) for f in fields)
        cls._field_ignorable = tuple(f[F_IGNORABLE] for f in fields)
        cls._field_struct = tuple(build(f[F_STRUCT]) if f[F_STRUCT] is not None else None for f in fields)
        return cls

    top = build(None)
    for struct_name in structs:
        if struct_name is not None:
            setattr(top, struct_name, build(struct_name))
    return top


# ------------------------------------------------------------------ plans
class FieldOp:
    """One field of one version: everything the decoder loop needs, resolved."""

    __slots__ = (
        "name",
        "kind",
        "elem_kind",
        "nullable",
        "compact",
        "child",
        "tag",
        "default",
        "ignorable",
        "struct_cls",
    )

    def __init__(self, name, kind, elem_kind, nullable, compact, child, tag, default, ignorable, struct_cls):
        self.name = name
        self.kind = kind
        self.elem_kind = elem_kind
        self.nullable = nullable
        self.compact = compact
        self.child = child
        self.tag = tag
        self.default = default
        self.ignorable = ignorable
        self.struct_cls = struct_cls

    def fresh_default(self) -> Any:
        return _fresh(self.default, self.kind, self.struct_cls)

    def is_default(self, value: Any) -> bool:
        if self.kind == ARRAY:
            return value is None if self.default is None else (value is not None and len(value) == 0)
        if self.kind == STRUCT:
            return value is None if self.default is None else value == self.struct_cls()
        if self.kind in (BYTES, RECORDS):
            if value is None or self.default is None:
                return value is None and self.default is None
            return bytes(value) == bytes(self.default)
        return value == self.default

    def __repr__(self) -> str:
        return f"FieldOp({self.name!r}, {KIND_NAMES[self.kind]}, tag={self.tag})"


class StructPlan:
    """The fields of one struct (or message) in one version."""

    __slots__ = ("name", "cls", "version", "flexible", "fields", "tagged", "tag_map", "absent", "api_key", "native")

    def __init__(self, name: str, cls: type[Message], version: int, flexible: bool, api_key: int) -> None:
        self.name = name
        self.cls = cls
        self.version = version
        self.flexible = flexible
        self.api_key = api_key
        self.fields: tuple[FieldOp, ...] = ()
        self.tagged: tuple[FieldOp, ...] = ()
        self.tag_map: dict[int, FieldOp] = {}
        self.absent: tuple[FieldOp, ...] = ()
        self.native: Any = None  # the Cython codec's compiled form, cached here

    def __repr__(self) -> str:
        return f"StructPlan({self.name} v{self.version}, {len(self.fields)} fields, {len(self.tagged)} tagged)"


def _layer_for(info: dict, version: int) -> tuple:
    for versions, _origin, fields in info["layers"]:
        if versions[0] <= version <= versions[1]:
            return fields
    raise KeyError(version)


def plan(name: str, version: int) -> StructPlan:
    """The plan of a message at a version; KeyError if the version does not exist."""
    return _plan(ALIASES.get(name, name), version)


@cache
def _plan(name: str, version: int) -> StructPlan:
    info = spec(name)
    lo, hi = info["valid_versions"]
    if not lo <= version <= hi:
        raise KeyError(f"{name} has no version {version} (valid {lo}-{hi})")
    cls = message_class(name)
    flexible = _in(version, info["flexible_versions"])
    api_key = info["api_key"] if info["api_key"] is not None else -1
    return _struct_plan(cls._message_name, cls, _layer_for(info, version), version, flexible, api_key)


def _struct_plan(
    name: str, cls: type[Message], fields: tuple, version: int, flexible: bool, api_key: int
) -> StructPlan:
    p = StructPlan(name, cls, version, flexible, api_key)
    regular: list[FieldOp] = []
    tagged: list[FieldOp] = []
    present: set[str] = set()
    slot_info = dict(zip(cls._field_names, zip(cls._field_defaults, cls._field_kinds, cls._field_struct)))
    for f in fields:
        if not _in(version, f[F_VERSIONS]):
            continue
        name_ = f[F_NAME]
        default, kind, struct_cls = slot_info[name_]
        ftype = f[F_TYPE]
        elem_kind = 0
        child = None
        if kind == ARRAY:
            element = ftype[2:]
            elem_kind = STRUCT if f[F_STRUCT] is not None else KIND_OF_TYPE[element]
        if f[F_STRUCT] is not None:
            child = _struct_plan(f[F_STRUCT], struct_cls, f[F_CHILDREN], version, flexible, api_key)
        override = f[F_FLEXIBLE]
        compact = flexible if override == "inherit" else _in(version, override)
        is_tagged = flexible and f[F_TAG] is not None and _in(version, f[F_TAGGED])
        op = FieldOp(
            name_,
            kind,
            elem_kind,
            _in(version, f[F_NULLABLE]),
            compact,
            child,
            f[F_TAG] if is_tagged else -1,
            default,
            f[F_IGNORABLE],
            struct_cls,
        )
        present.add(name_)
        (tagged if is_tagged else regular).append(op)
    absent = []
    ignorable = dict(zip(cls._field_names, cls._field_ignorable))
    ignorable.update((f[F_NAME], f[F_IGNORABLE]) for f in fields)
    for name_, (default, kind, struct_cls) in slot_info.items():
        if name_ not in present:
            absent.append(
                FieldOp(
                    name_, kind, 0, default is None, False, None, -1, default, ignorable.get(name_, False), struct_cls
                )
            )
    p.fields = tuple(regular)
    p.tagged = tuple(sorted(tagged, key=lambda op: op.tag))
    p.tag_map = {op.tag: op for op in p.tagged}
    p.absent = tuple(absent)
    return p
