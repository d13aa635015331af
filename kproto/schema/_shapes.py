"""The shape of the generated protocol facts in ``_messages``.

``tools/gen_schema.py`` writes one ``message(...)`` block per Kafka message, one
``layer(...)`` per version range defined by one definition file, and one
``field(...)`` line per field, naming only the facts that differ from the usual
value. These constructors turn them into the plain tuples and dicts the schema
loader and both codec implementations read, so the generated file stays
reviewable while the data stays compact and fast to walk.
"""

from __future__ import annotations

from typing import Any

OPEN = 0x7FFF  # upper bound of an open version range ("3+")

VersionRange = tuple[int, int]

# Positions in a field tuple.
(
    F_NAME,
    F_KAFKA_NAME,
    F_TYPE,
    F_VERSIONS,
    F_NULLABLE,
    F_TAG,
    F_TAGGED,
    F_FLEXIBLE,
    F_DEFAULT,
    F_IGNORABLE,
    F_MAP_KEY,
    F_ENTITY,
    F_STRUCT,
    F_CHILDREN,
) = range(14)


def field(
    name: str,
    kafka_name: str,
    type: str,
    versions: VersionRange,
    *,
    default: Any,
    nullable: VersionRange | None = None,
    tag: int | None = None,
    tagged: VersionRange | None = None,
    flexible: VersionRange | str | None = "inherit",
    ignorable: bool = False,
    map_key: bool = False,
    entity_type: str | None = None,
    struct: str | None = None,
    children: tuple = (),
) -> tuple:
    """One field: ``type`` is Kafka's ("int32", "[]string", "[]Topic"); ``struct``
    names the class of a struct or struct-array field, whose fields are ``children``."""
    return (
        name,
        kafka_name,
        type,
        versions,
        nullable,
        tag,
        tagged,
        flexible,
        default,
        ignorable,
        map_key,
        entity_type,
        struct,
        children,
    )


def layer(versions: VersionRange, origin: str, fields: tuple) -> tuple:
    """The fields of the versions taken from one definition file; ``origin`` names
    where: a Kafka release ("4.4.0", its kafka-clients jar) or "shared/message",
    "shared/message-4x" (the reference folders, for versions no release defines)."""
    return (versions, origin, fields)


def message(
    type: str,
    *,
    api_key: int | None,
    valid_versions: VersionRange,
    flexible_versions: VersionRange | None,
    layers: tuple,
    deprecated_versions: VersionRange | None = None,
    latest_version_unstable: bool = False,
    unstable_versions: VersionRange | None = None,
    listeners: tuple[str, ...] = (),
    min_version_4x: int | None = None,
    old_name: str | None = None,
) -> dict[str, Any]:
    """A request, response, header or data type; ``min_version_4x`` is the lowest
    version a Kafka 4.x release still defines (None: no 4.x definition).
    ``unstable_versions`` are versions whose definition was marked unstable
    (latestVersionUnstable) where they were taken from: a broker advertises them only
    with unstable.api.versions.enable, and their layout may still change."""
    return {
        "type": type,
        "api_key": api_key,
        "valid_versions": valid_versions,
        "flexible_versions": flexible_versions,
        "deprecated_versions": deprecated_versions,
        "latest_version_unstable": latest_version_unstable,
        "unstable_versions": unstable_versions,
        "listeners": listeners,
        "min_version_4x": min_version_4x,
        "old_name": old_name,
        "layers": layers,
    }
