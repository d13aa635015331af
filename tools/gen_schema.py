#!/usr/bin/env python3
"""Generate kproto's schema tables from the Apache Kafka JSON message definitions.

Reads ``message/`` (every API, every version from 0) and ``message-4x/`` (the
Kafka 4.x definitions: newer versions, and lower bounds that are the versions
4.x removed) and writes ``kproto/schema/_messages.py`` and
``kproto/_common/error_codes.py``: protocol facts only (names, types, version
ranges, defaults, tags, error codes), no prose.

Each wire version comes from the newest file that defines it: a message is a
list of *layers*, each a version range with its own field tree. The message
class is the union of the fields of all layers.

Usage:
    python tools/gen_schema.py [--source ../shared/kafka-protocol] [--package DIR] [--check]

``--check`` exits 1 when a committed output differs from what would be written.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import pprint
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Generated files, relative to the package root: the message tables, and the error
# codes, which live apart because kproto.errors (the lowest layer) reads them.
MESSAGES_FILE = Path("schema") / "_messages.py"
ERROR_CODES_FILE = Path("_common") / "error_codes.py"
PACKAGE = ROOT / "kproto"
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-protocol"


def _load_shapes():
    """kproto/schema/_shapes.py by path: the generator must run even when the package
    (or the table it is about to replace) does not import."""
    spec = importlib.util.spec_from_file_location("_kproto_shapes", ROOT / "kproto" / "schema" / "_shapes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPES = _load_shapes()
OPEN = SHAPES.OPEN  # upper bound of an open version range ("3+")

PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "uuid", "records"}
INTEGER_TYPES = {"int8", "int16", "uint16", "int32", "uint32", "int64"}

# Errors whose Java exception is a RetriableException (Kafka's Errors.java); the
# error-codes table has codes and names only, so this fact is kept here.
RETRIABLE_ERRORS = frozenset("""
    CORRUPT_MESSAGE UNKNOWN_TOPIC_OR_PARTITION LEADER_NOT_AVAILABLE NOT_LEADER_OR_FOLLOWER
    REQUEST_TIMED_OUT REPLICA_NOT_AVAILABLE NETWORK_EXCEPTION COORDINATOR_LOAD_IN_PROGRESS
    COORDINATOR_NOT_AVAILABLE NOT_COORDINATOR NOT_ENOUGH_REPLICAS NOT_ENOUGH_REPLICAS_AFTER_APPEND
    NOT_CONTROLLER CONCURRENT_TRANSACTIONS KAFKA_STORAGE_ERROR FETCH_SESSION_ID_NOT_FOUND
    INVALID_FETCH_SESSION_EPOCH LISTENER_NOT_FOUND FENCED_LEADER_EPOCH UNKNOWN_LEADER_EPOCH
    OFFSET_NOT_AVAILABLE PREFERRED_LEADER_NOT_AVAILABLE ELIGIBLE_LEADERS_NOT_AVAILABLE
    ELECTION_NOT_NEEDED UNSTABLE_OFFSET_COMMIT THROTTLING_QUOTA_EXCEEDED UNKNOWN_TOPIC_ID
    INCONSISTENT_TOPIC_ID FETCH_SESSION_TOPIC_ID_ERROR SHARE_SESSION_NOT_FOUND
    INVALID_SHARE_SESSION_EPOCH
""".split())


def read_json(path: Path) -> dict:
    """Kafka's JSON allows // comments; drop them before parsing."""
    lines = [line for line in path.read_text(encoding="utf-8").splitlines()
             if not line.lstrip().startswith("//")]
    return json.loads("\n".join(lines))


def parse_versions(spec: str | None) -> tuple[int, int] | None:
    """'3+' -> (3, OPEN); '0-2' -> (0, 2); '5' -> (5, 5); 'none'/None -> None."""
    if spec is None:
        return None
    spec = spec.strip()
    if spec == "none":
        return None
    if spec.endswith("+"):
        return (int(spec[:-1]), OPEN)
    if "-" in spec:
        lo, hi = spec.split("-")
        return (int(lo), int(hi))
    return (int(spec), int(spec))


def snake_case(name: str) -> str:
    """'IsrNodes' -> 'isr_nodes'; 'ZkMigrationReady' -> 'zk_migration_ready'."""
    s = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def parse_int_default(text: str) -> int:
    """Java's Long.decode rules: 0x.. hex, leading 0 octal, else decimal."""
    t = str(text).strip()
    sign = -1 if t.startswith("-") else 1
    t = t.lstrip("+-")
    if t[:2].lower() == "0x":
        value = int(t[2:], 16)
    elif len(t) > 1 and t.startswith("0"):
        value = int(t[1:], 8)
    else:
        value = int(t)
    return sign * value


def parse_default(field: dict, element_type: str):
    """The field's default as a Python literal (None = null)."""
    raw = field.get("default")
    ftype = field["type"]
    if ftype.startswith("[]"):
        if raw == "null":
            return None
        return ()  # empty array
    if ftype not in PRIMITIVES:
        return None if raw == "null" else ()  # struct: () means "a struct of defaults"
    if raw is None:
        return {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "uuid": 0,
                "records": None}.get(ftype, 0)
    if raw == "null":
        return None
    if ftype == "bool":
        return str(raw).strip().lower() == "true"
    if ftype in INTEGER_TYPES:
        return parse_int_default(raw)
    if ftype == "float64":
        return float(raw)
    if ftype == "string":
        return raw
    if ftype == "uuid":
        return 0 if raw in ("", "AAAAAAAAAAAAAAAAAAAAAA") else raw
    if ftype == "bytes":
        return raw.encode()
    return raw


class Generator:
    def __init__(self, source: Path) -> None:
        self.source = source

    def field_tree(self, fields: list[dict], common: dict[str, dict], message: str) -> tuple:
        out = []
        for f in fields:
            out.append(self.field_entry(f, common, message))
        return tuple(out)

    def field_entry(self, f: dict, common: dict[str, dict], message: str) -> tuple:
        ftype = f["type"]
        element = ftype[2:] if ftype.startswith("[]") else ftype
        children: tuple = ()
        struct_name = None
        if element not in PRIMITIVES:
            struct_name = element
            sub = f.get("fields")
            if sub is None:
                if element not in common:
                    raise SystemExit(f"{message}: field {f['name']} refers to unknown struct {element}")
                sub = common[element]["fields"]
            children = self.field_tree(sub, common, message)
        versions = parse_versions(f.get("versions"))
        if versions is None:
            raise SystemExit(f"{message}: field {f['name']} has no versions")
        tag = f.get("tag")
        if tag is not None:
            tag = int(tag)  # some definitions write the tag as a string ("0")
        return (
            snake_case(f["name"]),                  # 0 name
            f["name"],                              # 1 Kafka name
            ftype,                                  # 2 type ("int32", "[]string", "[]Topic", "Topic")
            versions,                               # 3 versions
            parse_versions(f.get("nullableVersions")),  # 4 nullable versions
            tag,                                    # 5 tag (None if not tagged)
            parse_versions(f.get("taggedVersions")),    # 6 tagged versions
            parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit",  # 7
            parse_default(f, element),              # 8 default
            bool(f.get("ignorable", False)),        # 9 ignorable
            bool(f.get("mapKey", False)),           # 10 map key
            f.get("entityType"),                    # 11 entity type
            struct_name,                            # 12 struct class name (None for primitives)
            children,                               # 13 child fields
        )

    def load_dir(self, folder: str) -> dict[str, dict]:
        out = {}
        for path in sorted((self.source / folder).glob("*.json")):
            spec = read_json(path)
            out[spec["name"]] = spec
        return out

    def layer(self, spec: dict, versions: tuple[int, int], origin: str) -> tuple:
        common = {c["name"]: c for c in spec.get("commonStructs", [])}
        return (versions, origin, self.field_tree(spec["fields"], common, spec["name"]))

    def build(self) -> dict:
        old = self.load_dir("message")
        new = self.load_dir("message-4x")
        # A renamed API (74: ListClientMetricsResources -> ListConfigResources) is one
        # message with two names: match files by (type, apiKey) as well as by name.
        def key(spec):
            return (spec["type"], spec.get("apiKey"), spec["name"] if "apiKey" not in spec else None)
        old_by_key = {key(s): s for s in old.values()}
        new_by_key = {key(s): s for s in new.values()}
        messages = {}
        aliases = {}
        for k in sorted(set(old_by_key) | set(new_by_key), key=lambda k: (str(k[1]), k[0], str(k[2]))):
            o, n = old_by_key.get(k), new_by_key.get(k)
            newest = n or o
            name = newest["name"]
            if o and n and o["name"] != n["name"]:
                aliases[o["name"]] = name
            layers = []
            valid_union = None
            if n:
                nv = parse_versions(n["validVersions"])
                layers.append(self.layer(n, nv, "4x"))
                valid_union = nv
            if o:
                ov = parse_versions(o["validVersions"])
                if n:
                    nv = parse_versions(n["validVersions"])
                    # Older versions the 4.x file no longer defines come from message/.
                    if ov[0] < nv[0]:
                        layers.append(self.layer(o, (ov[0], nv[0] - 1), "3x"))
                    if ov[1] > nv[1]:  # newer in the 3.x tree than 4.x: keep them too
                        layers.append(self.layer(o, (nv[1] + 1, ov[1]), "3x"))
                    valid_union = (min(ov[0], nv[0]), max(ov[1], nv[1]))
                else:
                    layers.append(self.layer(o, ov, "3x"))
                    valid_union = ov
            deprecated = parse_versions((o or n).get("deprecatedVersions"))
            if n and n.get("deprecatedVersions"):
                deprecated = parse_versions(n["deprecatedVersions"])
            messages[name] = {
                "type": newest["type"],
                "api_key": newest.get("apiKey"),
                "valid_versions": valid_union,
                "flexible_versions": parse_versions(newest.get("flexibleVersions")),
                "deprecated_versions": deprecated,
                "latest_version_unstable": bool(newest.get("latestVersionUnstable", False)),
                "listeners": tuple(newest.get("listeners", ())),
                # Lowest version the Kafka 4.x definitions still have (None: no 4.x file).
                "min_version_4x": parse_versions(n["validVersions"])[0] if n else None,
                "old_name": o["name"] if o and n and o["name"] != n["name"] else None,
                "layers": tuple(sorted(layers, key=lambda layer: layer[0][0])),
            }
        return {"messages": messages, "aliases": aliases}

    def error_codes(self) -> tuple:
        rows = []
        lines = (self.source / "error-codes.tsv").read_text().splitlines()
        for line in lines[1:]:
            if line.strip():
                code, name = line.split("\t")[:2]
                rows.append((int(code), name.strip(), name.strip() in RETRIABLE_ERRORS))
        return tuple(rows)

    def broker_versions(self) -> tuple:
        rows = []
        lines = (self.source / "broker-api-versions.tsv").read_text().splitlines()
        for line in lines[1:]:
            if line.strip():
                release, key, lo, hi = line.split("\t")[:4]
                rows.append((release.strip(), int(key), int(lo), int(hi)))
        return tuple(rows)

    def render_error_codes(self) -> str:
        return "\n".join([
            '"""Kafka error codes generated by tools/gen_schema.py. Do not edit by hand.',
            "",
            "(code, name, retriable) rows; retriable: Kafka's Java exception is a RetriableException.",
            '"""',
            "",
            "ERROR_CODES = " + pprint.pformat(self.error_codes(), width=110),
            "",
        ])

    def render_all(self) -> dict[Path, str]:
        """Every generated file: path relative to the package -> text."""
        return {MESSAGES_FILE: self.render(), ERROR_CODES_FILE: self.render_error_codes()}

    def render(self) -> str:
        data = self.build()
        body = [
            '"""Kafka protocol facts generated by tools/gen_schema.py. Do not edit by hand.',
            "",
            "One message(...) block per message, one layer(...) per version range of one",
            "definition file, one field(...) line per field; keywords left out have the",
            "default of kproto/schema/_shapes.py. Version ranges are (lo, hi), OPEN means",
            "open-ended, None means no versions.",
            '"""',
            "",
            "from kproto.schema._shapes import OPEN, field, layer, message",
            "",
            '__all__ = ["OPEN", "MESSAGES", "ALIASES", "BROKER_API_VERSIONS"]',
            "",
            "MESSAGES = {}",
            "",
        ]
        for name in sorted(data["messages"]):
            body.extend(render_message(name, data["messages"][name]))
        body += [
            "ALIASES = " + pprint.pformat(data["aliases"], width=110, sort_dicts=True),
            "",
            "BROKER_API_VERSIONS = " + pprint.pformat(self.broker_versions(), width=110, compact=True),
            "",
        ]
        return "\n".join(body)


# ------------------------------------------------------------------ rendering
# Keywords equal to the constructor's default are left out, so a line says only
# what is particular to its field and a Kafka upgrade is a diff of the lines that
# changed. The defaults are read from _shapes itself: they are written once.
RANGE_KEYWORDS = {"versions", "nullable", "tagged", "flexible", "valid_versions",
                  "flexible_versions", "deprecated_versions"}
INDENT = "    "


def _defaults(function) -> dict:
    return {name: p.default for name, p in inspect.signature(function).parameters.items()
            if p.default is not inspect.Parameter.empty}


FIELD_DEFAULTS = _defaults(SHAPES.field)
MESSAGE_DEFAULTS = _defaults(SHAPES.message)


def render_value(keyword: str, value) -> str:
    if keyword in RANGE_KEYWORDS and isinstance(value, tuple):
        lo, hi = value
        return f"({lo}, {'OPEN' if hi == OPEN else hi})"
    return repr(value)


def render_keywords(values: dict, defaults: dict) -> str:
    return ", ".join(f"{k}={render_value(k, v)}" for k, v in values.items()
                     if k not in defaults or defaults[k] != v or type(defaults[k]) is not type(v))


def render_fields(fields: tuple, depth: int) -> list[str]:
    lines = []
    pad = INDENT * depth
    for f in fields:
        positional = (f"{f[SHAPES.F_NAME]!r}, {f[SHAPES.F_KAFKA_NAME]!r}, {f[SHAPES.F_TYPE]!r}, "
                      f"{render_value('versions', f[SHAPES.F_VERSIONS])}")
        keywords = render_keywords({
            "default": f[SHAPES.F_DEFAULT], "nullable": f[SHAPES.F_NULLABLE], "tag": f[SHAPES.F_TAG],
            "tagged": f[SHAPES.F_TAGGED], "flexible": f[SHAPES.F_FLEXIBLE],
            "ignorable": f[SHAPES.F_IGNORABLE], "map_key": f[SHAPES.F_MAP_KEY],
            "entity_type": f[SHAPES.F_ENTITY], "struct": f[SHAPES.F_STRUCT],
        }, FIELD_DEFAULTS)
        children = f[SHAPES.F_CHILDREN]
        if children:
            lines.append(f"{pad}field({positional}, {keywords}, children=(")
            lines.extend(render_fields(children, depth + 1))
            lines.append(f"{pad})),")
        else:
            lines.append(f"{pad}field({positional}, {keywords}),")
    return lines


def render_message(name: str, facts: dict) -> list[str]:
    keywords = render_keywords({k: v for k, v in facts.items() if k not in ("type", "layers")},
                               MESSAGE_DEFAULTS)
    lines = [f"MESSAGES[{name!r}] = message(", f"{INDENT}{facts['type']!r}, {keywords},", f"{INDENT}layers=("]
    for versions, origin, fields in facts["layers"]:
        lines.append(f"{INDENT * 2}layer({render_value('versions', versions)}, {origin!r}, (")
        lines.extend(render_fields(fields, 3))
        lines.append(f"{INDENT * 2})),")
    lines += [f"{INDENT}),", ")", ""]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--package", type=Path, default=PACKAGE,
                        help="the kproto package folder to write into (default: this checkout's)")
    parser.add_argument("--check", action="store_true", help="fail if the committed output is stale")
    args = parser.parse_args(argv)
    outputs = Generator(args.source).render_all()
    if args.check:
        stale = [path for path, text in outputs.items()
                 if not (args.package / path).exists() or (args.package / path).read_text(encoding="utf-8") != text]
        for path in stale:
            print(f"{args.package / path} is stale: run python tools/gen_schema.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        target = args.package / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        print(f"wrote {target} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
