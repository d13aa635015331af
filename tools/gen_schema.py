#!/usr/bin/env python3
"""Generate kproto's schema tables from the Apache Kafka JSON message definitions.

Sources, newest first (each (message, version) is taken from the first that defines it):

1. The kafka-clients jar of every release in ``KAFKA_RELEASES`` (3.9.2 ... 4.4.0),
   read in place from ``common/message/*.json`` inside the jar under the cache that
   ``scripts/install-kafka.sh --clients-only`` fills (``--kafka-dir`` overrides;
   default: ``scripts/install-kafka.sh --print-dir``). A missing jar is an error
   naming that script, never a silent fallback.
2. ``--source`` (default ``../shared/kafka-protocol``): ``message-4x/`` (a 4.1-era
   subset) and ``message/`` (late-2024 trunk, every version from 0). They rank below
   every release and supply only what no jar defines; ``broker-api-versions.tsv``
   comes from there too.
3. Error codes: the newest release's own ``Errors`` table (name, and retriable when its
   Java exception is a RetriableException), printed by ``tools/KafkaErrors.java`` run
   against that jar (Java on PATH), joined with ``error-codes.tsv``, which must agree on
   every code both name.

The wire format of a stable (api, version) never changes between releases, so the
newest definition stands for all; ``--differences`` lists every (message, version)
whose layout (names left out) differs between two sources, to prove it. Versions a
definition marks unstable (``latestVersionUnstable``: the latest version, which a
broker advertises only with unstable.api.versions.enable) are kept, so a capture of
such a broker decodes, and recorded as ``unstable_versions``: their layout may still
change. Versions 4.x releases no longer define (KIP-896) come from the newest older
release that does; ``min_version_4x`` is the lowest version any 4.x release defines.

Writes ``kproto/schema/_messages.py`` (one ``layer(...)`` per run of versions taken
from one source, its origin the release, e.g. '4.4.0'), ``kproto/_common/error_codes.py``
``kproto/_common/api_keys.py`` (the ``ApiKey`` enum and the per-API facts of ``API_FACTS``)
and its C twin ``kproto/_c/_api_keys.pxd`` (the same keys and facts as compile-time
constants and an inline function): protocol facts only (names, types, version ranges,
defaults, tags, error codes, per-API rules), no prose.

Usage:
    python tools/gen_schema.py [--source ../shared/kafka-protocol] [--kafka-dir DIR]
                               [--package DIR] [--check | --differences | --origins]

``--check`` exits 1 when a committed output differs from what would be written.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import pprint
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Generated files, relative to the package root: the message tables, and the error
# codes, which live apart because kproto.errors (the lowest layer) reads them.
MESSAGES_FILE = Path("schema") / "_messages.py"
ERROR_CODES_FILE = Path("_common") / "error_codes.py"
API_KEYS_FILE = Path("_common") / "api_keys.py"
API_KEYS_PXD_FILE = Path("_c") / "_api_keys.pxd"
PACKAGE = ROOT / "kproto"
DEFAULT_SOURCE = ROOT.parent / "shared" / "kafka-protocol"
INSTALL_KAFKA = ROOT / "scripts" / "install-kafka.sh"

#: The kafka-clients releases whose definitions (common/message/*.json inside the jar)
#: the tables are made from, oldest first; scripts/install-kafka.sh --clients-only
#: fetches their jars. Adding a release here and regenerating is a Kafka upgrade.
KAFKA_RELEASES = ("3.9.2", "4.0.2", "4.1.2", "4.2.2", "4.3.1", "4.4.0")
JAR_MESSAGE_DIR = "common/message/"
#: The folders of --source, oldest first, and whether they are Kafka 4.x definitions.
#: They rank below every release: they supply only versions no release jar defines.
SHARED_FOLDERS = (("message", False), ("message-4x", True))

#: Per-API rules the definitions' fields do not state (Kafka's own generator and clients
#: hard-code them), each with where Kafka states it. Rendered, with the facts read from
#: the definitions (``software_fields_version``), into kproto/_common/api_keys.py and
#: kproto/_c/_api_keys.pxd: the codecs, the batch decoder and the analysis read them there.
API_FACTS = {
    # KIP-511: a broker answers an ApiVersions request of a version it does not know with
    # a v0 body (UNSUPPORTED_VERSION and its own range), so a response that fails at the
    # version asked is read again at this version, as Java's NetworkClient does.
    "response_fallback_versions": {"ApiVersions": 0},
    # KIP-511: ApiVersions responses keep header v0 at every version, so a client can read
    # the error code of a version the broker does not know (ApiMessageTypeGenerator.java).
    "response_header_v0_apis": ("ApiVersions",),
    # ControlledShutdownRequest.json: "Version 0 of ControlledShutdownRequest has a
    # non-standard request header which does not include clientId".
    "request_header_v0": (("ControlledShutdown", 0),),
    # SaslHandshakeRequest.json: "Version 1 supports SASL_AUTHENTICATE"; after a successful
    # SaslHandshake of this version the SASL tokens travel raw, in no Kafka frame.
    "sasl_raw_tokens_handshake_version": 0,
}


def _load_shapes():
    """kproto/schema/_shapes.py by path: the generator must run even when the package
    (or the table it is about to replace) does not import."""
    spec = importlib.util.spec_from_file_location("_kproto_shapes", ROOT / "kproto" / "schema" / "_shapes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SHAPES = _load_shapes()
OPEN = SHAPES.OPEN  # upper bound of an open version range ("3+")

PRIMITIVES = {
    "bool",
    "int8",
    "int16",
    "uint16",
    "int32",
    "uint32",
    "int64",
    "float64",
    "string",
    "bytes",
    "uuid",
    "records",
}
INTEGER_TYPES = {"int8", "int16", "uint16", "int32", "uint32", "int64"}


def parse_json(text: str) -> dict:
    """Kafka's JSON allows // comments; drop them before parsing."""
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("//")]
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


def enum_name(message_name: str) -> str:
    """'ListOffsetsRequest' -> 'LIST_OFFSETS'."""
    return snake_case(message_name.removesuffix("Request")).upper()


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
        return {"bool": False, "float64": 0.0, "string": "", "bytes": b"", "uuid": 0, "records": None}.get(ftype, 0)
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


class Source:
    """One set of definition files: a kafka-clients release jar or a ../shared folder."""

    def __init__(self, label: str, specs: dict[str, dict], is_4x: bool) -> None:
        self.label = label  # recorded as the origin of the layers it supplies
        self.specs = specs  # message name -> parsed definition
        self.is_4x = is_4x  # a Kafka 4.x definition (its lower bounds are what 4.x kept)


def release_key(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def load_jar(path: Path) -> dict[str, dict]:
    """The definitions a kafka-clients jar ships under common/message/, read in place."""
    with zipfile.ZipFile(path) as jar:
        names = sorted(n for n in jar.namelist() if n.startswith(JAR_MESSAGE_DIR) and n.endswith(".json"))
        specs = [parse_json(jar.read(n).decode("utf-8")) for n in names]
    return {spec["name"]: spec for spec in specs}


def default_kafka_dir() -> Path:
    """The cache scripts/install-kafka.sh fills; the script states the rule
    (KPROTO_CACHE_DIR, XDG_CACHE_HOME, ~/.cache), so it is asked rather than restated."""
    result = subprocess.run(["bash", str(INSTALL_KAFKA), "--print-dir"], capture_output=True, text=True)
    if result.returncode != 0 or not result.stdout.strip():
        raise SystemExit(f"gen_schema: {INSTALL_KAFKA} --print-dir failed: {result.stderr.strip()}")
    return Path(result.stdout.strip())


def jar_path(kafka_dir: Path, release: str) -> Path:
    return kafka_dir / release / "clients" / f"kafka-clients-{release}.jar"


KAFKA_ERRORS_PROGRAM = ROOT / "tools" / "KafkaErrors.java"


def kafka_error_table(kafka_dir: Path, release: str) -> dict[int, tuple[str, bool]]:
    """code -> (name, retriable), as the release's own Errors class says: the Java program
    tools/KafkaErrors.java run against its kafka-clients jars (a JVM start, about a second)."""
    clients = jar_path(kafka_dir, release).parent
    java = shutil.which("java")
    if java is None:
        raise SystemExit(
            "gen_schema: java is not on PATH; Kafka's error table is read from its jar "
            "(scripts/install-java.sh installs a runtime)"
        )
    result = subprocess.run(
        [java, "-cp", str(clients / "*"), str(KAFKA_ERRORS_PROGRAM)], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise SystemExit(
            f"gen_schema: reading Kafka {release}'s error table failed (run "
            f"scripts/install-kafka.sh --clients-only):\n{result.stderr.strip()[-2000:]}"
        )
    table = {}
    for line in result.stdout.splitlines():
        code, name, retriable = line.split("\t")
        table[int(code)] = (name, retriable == "retriable")
    return table


def spec_key(spec: dict) -> tuple:
    """A renamed API (74: ListClientMetricsResources -> ListConfigResources) is one
    message with two names: definitions match by (type, apiKey), data types by name."""
    return (spec["type"], spec.get("apiKey"), spec["name"] if "apiKey" not in spec else None)


def message_order(key: tuple) -> tuple:
    return (str(key[1]), key[0], str(key[2]))


def in_range(version: int, versions) -> bool:
    return versions is not None and versions[0] <= version <= versions[1]


def wire_layout(fields: tuple, version: int, flexible: bool) -> tuple:
    """What the bytes of ``version`` depend on, names left out: per field present, in
    wire order, its type, nullability, compactness and tag (with its default, which
    decides whether a tagged field is written); struct fields recursively."""
    regular, tagged = [], []
    for f in fields:
        if not in_range(version, f[SHAPES.F_VERSIONS]):
            continue
        override = f[SHAPES.F_FLEXIBLE]
        compact = flexible if override == "inherit" else in_range(version, override)
        is_tagged = flexible and f[SHAPES.F_TAG] is not None and in_range(version, f[SHAPES.F_TAGGED])
        ftype = f[SHAPES.F_TYPE]
        element = ftype[2:] if ftype.startswith("[]") else ftype
        entry = (
            ftype.startswith("[]"),
            element if element in PRIMITIVES else "struct",
            in_range(version, f[SHAPES.F_NULLABLE]),
            compact,
            f[SHAPES.F_TAG] if is_tagged else None,
            f[SHAPES.F_DEFAULT] if is_tagged else None,
            wire_layout(f[SHAPES.F_CHILDREN], version, flexible),
        )
        (tagged if is_tagged else regular).append(entry)
    return tuple(regular) + tuple(sorted(tagged, key=lambda e: e[4]))


def marked_unstable(src: Source, spec: dict, version: int) -> bool:
    """Whether ``src`` marks ``version`` unstable: the latest version of a request
    marked latestVersionUnstable, and the response of that request version."""
    if spec["type"] == "response":
        spec = next(
            (s for s in src.specs.values() if s["type"] == "request" and s.get("apiKey") == spec.get("apiKey")), spec
        )
    valid = parse_versions(spec.get("validVersions"))
    return bool(spec.get("latestVersionUnstable")) and valid is not None and version == valid[1]


class Generator:
    def __init__(self, source: Path, kafka_dir: Path | None = None) -> None:
        self.source = source
        self.kafka_dir = kafka_dir
        self._sources: list[Source] | None = None
        self._data: dict | None = None

    def sources(self) -> list[Source]:
        """Every definition set, newest first: the release jars, then ../shared."""
        if self._sources is None:
            kafka_dir = self.kafka_dir or default_kafka_dir()
            missing = [r for r in KAFKA_RELEASES if not jar_path(kafka_dir, r).is_file()]
            if missing:
                raise SystemExit(
                    f"gen_schema: no kafka-clients jar for {', '.join(missing)} under {kafka_dir}: "
                    f"run scripts/install-kafka.sh --clients-only (it fetches them from Maven Central)"
                )
            found = [
                Source(r, load_jar(jar_path(kafka_dir, r)), release_key(r) >= (4,))
                for r in sorted(KAFKA_RELEASES, key=release_key, reverse=True)
            ]
            for folder, is_4x in reversed(SHARED_FOLDERS):
                found.append(Source(f"shared/{folder}", self.load_dir(folder), is_4x))
            self._sources = found
        return self._sources

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
            snake_case(f["name"]),  # 0 name
            f["name"],  # 1 Kafka name
            ftype,  # 2 type ("int32", "[]string", "[]Topic", "Topic")
            versions,  # 3 versions
            parse_versions(f.get("nullableVersions")),  # 4 nullable versions
            tag,  # 5 tag (None if not tagged)
            parse_versions(f.get("taggedVersions")),  # 6 tagged versions
            parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit",  # 7
            parse_default(f, element),  # 8 default
            bool(f.get("ignorable", False)),  # 9 ignorable
            bool(f.get("mapKey", False)),  # 10 map key
            f.get("entityType"),  # 11 entity type
            struct_name,  # 12 struct class name (None for primitives)
            children,  # 13 child fields
        )

    def load_dir(self, folder: str) -> dict[str, dict]:
        if not (self.source / folder).is_dir():
            raise SystemExit(
                f"gen_schema: {self.source / folder} is missing (--source names the kafka-protocol reference folder)"
            )
        out = {}
        for path in sorted((self.source / folder).glob("*.json")):
            spec = parse_json(path.read_text(encoding="utf-8"))
            out[spec["name"]] = spec
        return out

    def fields_of(self, spec: dict) -> tuple:
        common = {c["name"]: c for c in spec.get("commonStructs", [])}
        return self.field_tree(spec.get("fields", []), common, spec["name"])

    def definitions(self) -> dict[tuple, list[tuple[Source, dict, tuple[int, int]]]]:
        """Per message: (source, definition, valid versions) of every source that
        defines versions of it, newest source first ("none" left out)."""
        out: dict[tuple, list] = {}
        for src in self.sources():
            for name in sorted(src.specs):
                spec = src.specs[name]
                valid = parse_versions(spec["validVersions"])
                if valid is not None:
                    out.setdefault(spec_key(spec), []).append((src, spec, valid))
        return out

    def build(self) -> dict:
        if self._data is not None:
            return self._data
        definitions = self.definitions()
        # Each version from the newest source that defines it.
        chosen: dict[tuple, dict[int, tuple[Source, dict]]] = {}
        for k, defs in definitions.items():
            picks: dict[int, tuple[Source, dict]] = {}
            for src, spec, (lo, hi) in defs:
                for version in range(lo, hi + 1):
                    picks.setdefault(version, (src, spec))
            chosen[k] = picks
        unstable = self.unstable_versions(chosen)
        messages, aliases = {}, {}
        for k in sorted(definitions, key=message_order):
            defs, picks = definitions[k], chosen[k]
            newest = defs[0][1]
            name = newest["name"]
            versions = sorted(picks)
            if versions != list(range(versions[0], versions[-1] + 1)):
                raise SystemExit(f"{name}: the sources leave a gap in its versions {versions}")
            older_names = [spec["name"] for _src, spec, _v in defs if spec["name"] != name]
            for old in older_names:
                aliases[old] = name
            deprecated = next(
                (parse_versions(spec["deprecatedVersions"]) for _s, spec, _v in defs if "deprecatedVersions" in spec),
                None,
            )
            floors_4x = [valid[0] for src, _spec, valid in defs if src.is_4x]
            api_unstable = sorted(unstable.get(newest.get("apiKey"), ())) if k[0] in ("request", "response") else []
            if api_unstable and api_unstable != list(range(api_unstable[0], api_unstable[-1] + 1)):
                raise SystemExit(f"{name}: unstable versions {api_unstable} are not one range")
            messages[name] = {
                "type": newest["type"],
                "api_key": newest.get("apiKey"),
                "valid_versions": (versions[0], versions[-1]),
                "flexible_versions": parse_versions(newest.get("flexibleVersions")),
                "deprecated_versions": deprecated,
                "latest_version_unstable": versions[-1] in api_unstable,
                "unstable_versions": (api_unstable[0], api_unstable[-1]) if api_unstable else None,
                "listeners": tuple(newest.get("listeners", ())),
                # Lowest version a Kafka 4.x release still defines (None: 4.x has none).
                "min_version_4x": min(floors_4x) if floors_4x else None,
                "old_name": older_names[0] if older_names else None,
                "layers": self.layers(picks),
            }
        self._data = {"messages": messages, "aliases": aliases}
        return self._data

    def layers(self, picks: dict[int, tuple[Source, dict]]) -> tuple:
        """One layer per run of consecutive versions taken from the same source."""
        runs: list[list] = []  # [source, definition, lo, hi]
        for version in sorted(picks):
            src, spec = picks[version]
            if runs and runs[-1][0] is src and runs[-1][3] == version - 1:
                runs[-1][3] = version
            else:
                runs.append([src, spec, version, version])
        out = []
        for src, spec, lo, hi in runs:
            out.append(((lo, hi), src.label, self.fields_of(spec)))
        return tuple(out)

    @staticmethod
    def unstable_versions(chosen: dict[tuple, dict[int, tuple[Source, dict]]]) -> dict[int, set[int]]:
        """API key -> versions that are unstable where they were taken from: the latest
        version of a request definition marked latestVersionUnstable (a broker
        advertises them only with unstable.api.versions.enable). The response of that
        version is unstable with it."""
        out: dict[int, set[int]] = {}
        for (kind, api_key, _name), picks in chosen.items():
            if kind != "request":
                continue
            for version, (src, spec) in picks.items():
                if marked_unstable(src, spec, version):
                    out.setdefault(api_key, set()).add(version)
        return out

    def layout_differences(self) -> list[tuple[str, int, str, bool, str, bool]]:
        """Every (message, version) whose wire layout differs between two sources that
        define it, as (name, version, older source, unstable there, newest source,
        unstable there): the layout of a stable version must never change."""
        found = []
        definitions = self.definitions()
        for k in sorted(definitions, key=message_order):
            defs = definitions[k]
            layouts: dict[int, list[tuple[str, tuple, bool]]] = {}
            for src, spec, (lo, hi) in defs:
                fields = self.fields_of(spec)
                flexible_versions = parse_versions(spec.get("flexibleVersions"))
                for version in range(lo, hi + 1):
                    layouts.setdefault(version, []).append(
                        (
                            src.label,
                            wire_layout(fields, version, in_range(version, flexible_versions)),
                            marked_unstable(src, spec, version),
                        )
                    )
            for version, seen in sorted(layouts.items()):
                newest_label, newest_layout, newest_unstable = seen[0]
                for label, layout, unstable in seen[1:]:
                    if layout != newest_layout:
                        found.append((defs[0][1]["name"], version, label, unstable, newest_label, newest_unstable))
        return found

    def error_codes(self) -> tuple:
        """(code, name, retriable) for every error: Kafka's own table, read from the newest
        release's classes (Errors.values(), retriable when its exception is a Java
        RetriableException), joined with ../shared's error-codes.tsv, which must agree with
        it on every code both have (a code only the older table has is kept)."""
        kafka = kafka_error_table(self.kafka_dir or default_kafka_dir(), KAFKA_RELEASES[-1])
        shared = {}
        for line in (self.source / "error-codes.tsv").read_text().splitlines()[1:]:
            if line.strip():
                code, name = line.split("\t")[:2]
                shared[int(code)] = name.strip()
        clashes = [
            (code, name, kafka[code][0]) for code, name in shared.items() if code in kafka and kafka[code][0] != name
        ]
        if clashes:
            raise SystemExit(
                f"gen_schema: error-codes.tsv and Kafka {KAFKA_RELEASES[-1]} name codes differently: {clashes}"
            )
        rows = {code: (code, name, False) for code, name in shared.items()}
        rows.update((code, (code, name, retriable)) for code, (name, retriable) in kafka.items())
        return tuple(rows[code] for code in sorted(rows))

    def broker_versions(self) -> tuple:
        rows = []
        lines = (self.source / "broker-api-versions.tsv").read_text().splitlines()
        for line in lines[1:]:
            if line.strip():
                release, key, lo, hi = line.split("\t")[:4]
                rows.append((release.strip(), int(key), int(lo), int(hi)))
        return tuple(rows)

    def render_error_codes(self) -> str:
        return "\n".join(
            [
                '"""Kafka error codes generated by tools/gen_schema.py. Do not edit by hand.',
                "",
                "(code, name, retriable) rows; retriable: Kafka's Java exception is a RetriableException.",
                '"""',
                "",
                "ERROR_CODES = " + pprint.pformat(self.error_codes(), width=110),
                "",
            ]
        )

    def render_api_keys(self) -> str:
        """``ApiKey``, an IntEnum of every API key, named after its request (Kafka's
        ApiKeys spelling: ListOffsetsRequest -> LIST_OFFSETS); a renamed API keeps its
        old name as an alias. Then the per-API facts, and the fallback rule that reads them."""
        facts = self.api_fact_keys()
        lines = [
            '"""Kafka API keys and per-API facts generated by tools/gen_schema.py. Do not edit by hand.',
            "",
            "The C twin is kproto/_c/_api_keys.pxd, written by the same run.",
            '"""',
            "",
            "from enum import IntEnum",
            "",
            "",
            "class ApiKey(IntEnum):",
            '    """Every Kafka API key, named after its request (Kafka\'s ApiKeys spelling)."""',
            "",
        ]
        for key, member, alias_of in self.api_key_members():
            lines.append(f"    {member} = {key}" + (f"  # old name of {alias_of}" if alias_of else ""))
        fallbacks = ", ".join(f"ApiKey.{m}: {v}" for m, v in facts["response_fallback_versions"].items())
        header_v0 = ", ".join(f"ApiKey.{m}" for m in facts["response_header_v0_apis"])
        request_v0 = ", ".join(f"(ApiKey.{m}, {v})" for m, v in facts["request_header_v0"])
        lines += [
            "",
            "",
            "# Per-API facts (tools/gen_schema.py API_FACTS, with where Kafka states each).",
            "",
            "#: A response that fails at the version asked is read again at this version (KIP-511:",
            "#: a broker answers an ApiVersions version it does not know with a v0 body).",
            f"RESPONSE_FALLBACK_VERSIONS = {{{fallbacks}}}",
            "#: APIs whose response header is v0 at every version (KIP-511).",
            f"RESPONSE_HEADER_V0_APIS = frozenset({{{header_v0}}})",
            "#: Request (API, version)s whose header is v0, without a client id.",
            f"REQUEST_HEADER_V0 = frozenset({{{request_v0}}})",
            "#: The first ApiVersions request version with ClientSoftwareName / ClientSoftwareVersion.",
            f"CLIENT_SOFTWARE_FIRST_VERSION = {self.software_fields_version()}",
            "#: After a successful SaslHandshake of this version the SASL tokens travel raw, in no frame.",
            f"SASL_RAW_TOKENS_HANDSHAKE_VERSION = {API_FACTS['sasl_raw_tokens_handshake_version']}",
            "",
            "",
            "def response_fallback_version(api_key: int, api_version: int) -> int:",
            '    """The version to read a response again at when it fails at ``api_version``; -1: none."""',
            "    fallback = RESPONSE_FALLBACK_VERSIONS.get(api_key, -1)",
            "    return fallback if api_version > fallback else -1",
        ]
        return "\n".join(lines) + "\n"

    def render_api_keys_pxd(self) -> str:
        """The C twin of render_api_keys: the keys as API_KEY_<NAME> constants, the facts
        C reads, and response_fallback_version written from the same table."""
        facts = self.api_fact_keys()
        lines = [
            "# Kafka API keys and per-API facts generated by tools/gen_schema.py. Do not edit by hand.",
            "# The twin of kproto/_common/api_keys.py (kproto.ApiKey), written by the same run; C code",
            "# cimports these names instead of writing API numbers.",
            "",
            "cdef enum:",
        ]
        for key, member, alias_of in self.api_key_members():
            lines.append(f"    API_KEY_{member} = {key}" + (f"  # old name of API_KEY_{alias_of}" if alias_of else ""))
        lines += [
            "",
            "cdef enum:",
            "    # The first ApiVersions request version with ClientSoftwareName / ClientSoftwareVersion.",
            f"    CLIENT_SOFTWARE_FIRST_VERSION = {self.software_fields_version()}",
            "    # After a successful SaslHandshake of this version the SASL tokens travel raw, in no frame.",
            f"    SASL_RAW_TOKENS_HANDSHAKE_VERSION = {API_FACTS['sasl_raw_tokens_handshake_version']}",
            "",
            "",
            "cdef inline int response_fallback_version(int api_key, int api_version) noexcept nogil:",
            "    # The version to read a response again at when it fails at api_version; -1: none (KIP-511).",
        ]
        for member, version in facts["response_fallback_versions"].items():
            lines += [
                f"    if api_key == API_KEY_{member}:",
                f"        return {version} if api_version > {version} else -1",
            ]
        lines.append("    return -1")
        return "\n".join(lines) + "\n"

    def api_key_members(self) -> list[tuple[int, str, str | None]]:
        """(key, member name, name it is an old name of or None), in enum order."""
        data = self.build()
        members = []
        for name, facts in data["messages"].items():
            if facts["type"] == "request":
                members.append((facts["api_key"], enum_name(name), None))
        for old, new in data["aliases"].items():
            if data["messages"][new]["type"] == "request":
                members.append((data["messages"][new]["api_key"], enum_name(old), enum_name(new)))
        return sorted(members, key=lambda m: (m[0], m[2] is not None, m[1]))

    def software_fields_version(self) -> int:
        """The first ApiVersionsRequest version with ClientSoftwareName and
        ClientSoftwareVersion (KIP-511), as its definition says."""
        request = self.build()["messages"]["ApiVersionsRequest"]
        firsts = {
            f[SHAPES.F_KAFKA_NAME]: f[SHAPES.F_VERSIONS][0]
            for _versions, _origin, fields in request["layers"]
            for f in fields
        }
        found = {firsts.get("ClientSoftwareName"), firsts.get("ClientSoftwareVersion")}
        if len(found) != 1 or None in found:
            raise SystemExit(f"gen_schema: ApiVersionsRequest's software fields start at {found}, not one version")
        return found.pop()

    def api_fact_keys(self) -> dict:
        """API_FACTS with each API named as its ApiKey member (a name the schema lacks stops the run)."""
        requests = {
            name.removesuffix("Request"): enum_name(name)
            for name, facts in self.build()["messages"].items()
            if facts["type"] == "request"
        }

        def member(api: str) -> str:
            if api not in requests:
                raise SystemExit(f"gen_schema: API_FACTS names {api}, which no definition has")
            return requests[api]

        return {
            "response_fallback_versions": {
                member(api): v for api, v in API_FACTS["response_fallback_versions"].items()
            },
            "response_header_v0_apis": tuple(member(api) for api in API_FACTS["response_header_v0_apis"]),
            "request_header_v0": tuple((member(api), v) for api, v in API_FACTS["request_header_v0"]),
        }

    def render_all(self) -> dict[Path, str]:
        """Every generated file: path relative to the package -> text."""
        return {
            MESSAGES_FILE: self.render(),
            ERROR_CODES_FILE: self.render_error_codes(),
            API_KEYS_FILE: self.render_api_keys(),
            API_KEYS_PXD_FILE: self.render_api_keys_pxd(),
        }

    def render(self) -> str:
        data = self.build()
        body = [
            '"""Kafka protocol facts generated by tools/gen_schema.py. Do not edit by hand.',
            "",
            "One message(...) block per message, one layer(...) per run of versions taken",
            "from one definition file (its origin: the Kafka release whose kafka-clients jar",
            "defines them newest, or shared/message*), one field(...) line per field; keywords",
            "left out have the default of kproto/schema/_shapes.py. Version ranges are",
            "(lo, hi), OPEN means open-ended, None means no versions.",
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
RANGE_KEYWORDS = {
    "versions",
    "nullable",
    "tagged",
    "flexible",
    "valid_versions",
    "flexible_versions",
    "deprecated_versions",
}
INDENT = "    "


def _defaults(function) -> dict:
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


FIELD_DEFAULTS = _defaults(SHAPES.field)
MESSAGE_DEFAULTS = _defaults(SHAPES.message)


def render_value(keyword: str, value) -> str:
    if keyword in RANGE_KEYWORDS and isinstance(value, tuple):
        lo, hi = value
        return f"({lo}, {'OPEN' if hi == OPEN else hi})"
    return repr(value)


def render_keywords(values: dict, defaults: dict) -> str:
    return ", ".join(
        f"{k}={render_value(k, v)}"
        for k, v in values.items()
        if k not in defaults or defaults[k] != v or type(defaults[k]) is not type(v)
    )


def render_fields(fields: tuple, depth: int) -> list[str]:
    lines = []
    pad = INDENT * depth
    for f in fields:
        positional = (
            f"{f[SHAPES.F_NAME]!r}, {f[SHAPES.F_KAFKA_NAME]!r}, {f[SHAPES.F_TYPE]!r}, "
            f"{render_value('versions', f[SHAPES.F_VERSIONS])}"
        )
        keywords = render_keywords(
            {
                "default": f[SHAPES.F_DEFAULT],
                "nullable": f[SHAPES.F_NULLABLE],
                "tag": f[SHAPES.F_TAG],
                "tagged": f[SHAPES.F_TAGGED],
                "flexible": f[SHAPES.F_FLEXIBLE],
                "ignorable": f[SHAPES.F_IGNORABLE],
                "map_key": f[SHAPES.F_MAP_KEY],
                "entity_type": f[SHAPES.F_ENTITY],
                "struct": f[SHAPES.F_STRUCT],
            },
            FIELD_DEFAULTS,
        )
        children = f[SHAPES.F_CHILDREN]
        if children:
            lines.append(f"{pad}field({positional}, {keywords}, children=(")
            lines.extend(render_fields(children, depth + 1))
            lines.append(f"{pad})),")
        else:
            lines.append(f"{pad}field({positional}, {keywords}),")
    return lines


def render_message(name: str, facts: dict) -> list[str]:
    keywords = render_keywords({k: v for k, v in facts.items() if k not in ("type", "layers")}, MESSAGE_DEFAULTS)
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
    parser.add_argument(
        "--package",
        type=Path,
        default=PACKAGE,
        help="the kproto package folder to write into (default: this checkout's)",
    )
    parser.add_argument(
        "--kafka-dir",
        type=Path,
        default=None,
        help="where the release jars are, <dir>/<release>/clients/kafka-clients-<release>.jar "
        "(default: scripts/install-kafka.sh --print-dir)",
    )
    parser.add_argument("--check", action="store_true", help="fail if the committed output is stale")
    parser.add_argument(
        "--differences",
        action="store_true",
        help="list every (message, version) whose wire layout differs between sources, then exit",
    )
    parser.add_argument(
        "--origins",
        action="store_true",
        help="list, per message, the release each run of versions is taken from, then exit",
    )
    args = parser.parse_args(argv)
    generator = Generator(args.source, args.kafka_dir)
    if args.origins:
        for name, facts in sorted(generator.build()["messages"].items()):
            runs = ", ".join(
                f"v{lo}-{hi} {origin}" if lo != hi else f"v{lo} {origin}"
                for (lo, hi), origin, _fields in facts["layers"]
            )
            unstable = facts["unstable_versions"]
            print(f"{name}: {runs}" + (f" (unstable v{unstable[0]}-{unstable[1]})" if unstable else ""))
        return 0
    if args.differences:
        for name, version, older, older_unstable, newest, newest_unstable in generator.layout_differences():
            print(
                f"{name} v{version}: {older}{' (unstable)' * older_unstable} differs from "
                f"{newest}{' (unstable)' * newest_unstable}"
            )
        return 0
    outputs = generator.render_all()
    if args.check:
        stale = [
            path
            for path, text in outputs.items()
            if not (args.package / path).exists() or (args.package / path).read_text(encoding="utf-8") != text
        ]
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
