"""The three layers of the package (issue 39, item 1), drawn from the imports of kproto/ itself.

* the codec: ``kproto`` and its modules (messages, headers, framing, records, versions), no
  dependency beyond the standard library;
* the Arrow layer: ``kproto.arrow`` (capture reading, frame decoding, exchanges);
* the analysis application: ``kproto.analyze`` (the Spark job, the report, the fingerprints, the CLI).

The private engines keep their places (``kproto._c``, ``kproto._py``, ``kproto._common``): the
ones that only the Arrow layer uses belong to it (:data:`ARROW_ENGINES`). Every import is an
edge, at module level or inside a function, in Python and in Cython (``.pyx`` with the ``.pxi``
it includes), so an import tucked into a function can hide neither a cycle nor a step up.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.twin_selection import module_imports

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("codec", "arrow", "analyze")

#: Engines of the Arrow layer that live beside the codec's (one build, one twin package).
ARROW_ENGINES = ("kproto._c._batch", "kproto._c._capture", "kproto._py.batch", "kproto._py.capture")

#: Third-party packages a layer may import at module level (the codec: none).
HEAVY = {"numpy", "pyarrow", "pyspark"}


def layer_of(module: str) -> str:
    if module == "kproto.analyze" or module.startswith("kproto.analyze."):
        return "analyze"
    if module == "kproto.arrow" or module.startswith("kproto.arrow.") or module.startswith(ARROW_ENGINES):
        return "arrow"
    return "codec"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


_CYTHON_IMPORT = re.compile(r"^\s*(?:from\s+(kproto[\w.]*)\s+c?import\s+([\w, ()]+)|c?import\s+(kproto[\w.]*))", re.M)
_INCLUDE = re.compile(r'^include\s+"(\S+)"', re.M)


def _exists(module: str) -> bool:
    base = ROOT / Path(*module.split("."))
    return any(base.with_suffix(s).is_file() for s in (".py", ".pyx", ".pxd")) or (base / "__init__.py").is_file()


def _cython_imports(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    text += "".join("\n" + (path.parent / name).read_text(encoding="utf-8") for name in _INCLUDE.findall(text))
    found = set()
    for match in _CYTHON_IMPORT.finditer(text):
        if match.group(3):
            found.add(match.group(3))
            continue
        base = match.group(1)
        for name in (part.split()[0] for part in match.group(2).strip("() ").split(",") if part.strip()):
            found.add(f"{base}.{name}" if _exists(f"{base}.{name}") else base)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the kproto modules it imports, anywhere in it (a package's own submodule imports included)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "kproto").rglob("*")):
        if path.suffix not in (".py", ".pyx") or "__pycache__" in path.parts:
            continue
        module = _module_name(path)
        if path.suffix == ".pyx":
            imports = _cython_imports(path)
        else:
            package = module if path.name == "__init__.py" else module.rpartition(".")[0]
            imports = module_imports(path.read_text(encoding="utf-8"), package, anywhere=True)
        graph[module] = {name for name in imports if name != module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk closes, as the path that closes it."""
    found, state = [], {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt, path + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return found


def test_the_graph_sees_every_module():
    graph = import_graph()
    assert {"kproto", "kproto.api", "kproto.arrow.capture", "kproto.analyze.spark.jobs", "kproto._c._capture"} <= set(
        graph
    )
    assert "kproto.arrow.frames" in graph["kproto.arrow.exchanges"]  # a module-level import
    assert "kproto.arrow._sniff" in graph["kproto.analyze.cli_analyze"]  # one inside a function
    assert "kproto._common.capture" in graph["kproto._c._capture"]  # a Cython one, through a .pxi


def test_no_import_runs_up_the_layers():
    upward = sorted(
        (module, name)
        for module, names in import_graph().items()
        for name in names
        if LAYERS.index(layer_of(name)) > LAYERS.index(layer_of(module))
    )
    assert upward == []


def test_each_layer_has_its_package():
    assert {layer_of(m) for m in import_graph()} == set(LAYERS)
    for package in ("kproto/arrow/__init__.py", "kproto/analyze/__init__.py"):
        assert (ROOT / package).is_file()


def test_the_import_graph_has_no_cycle():
    assert cycles(import_graph()) == []


def test_the_codec_imports_nothing_heavy():
    """The codec runs on the standard library alone (the compressors are optional, imported where used)."""
    for path in sorted((ROOT / "kproto").rglob("*.py")):
        module = _module_name(path)
        if layer_of(module) != "codec":
            continue
        text = path.read_text(encoding="utf-8")
        heavy = {name for name in re.findall(r"^(?:import|from)\s+(\w+)", text, re.M) if name in HEAVY}
        assert heavy == set(), (module, heavy)
