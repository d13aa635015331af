"""The Spark package's shape (issue 39, item 3): imports that go one way, and one home for
the small tables, the report's facts and the end of a run.

The import graph is drawn from the source (ast), not from what Python happens to have
loaded: every ``import`` of a kproto.analyze.spark module, at module level or inside a function,
is an edge, so an import tucked into a function cannot hide a cycle. Imports inside
functions are refused but for the few named in LAZY_IMPORTS, each with why.

The second half is in the style of tests/project/test_one_rule.py: each rule of the small tables
and of the end of a run has a fingerprint, a line shape its definition has (in the
pyarrow idiom and in the Spark SQL one it was once written in again), and may be found
only in its one place. docs/architecture.md ("Where each rule lives") is the prose.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.project.test_layers import cycles
from tests.project.test_one_rule import assert_one_place, places

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "kproto" / "analyze" / "spark"

#: (file, function, imported module) -> why it is imported when the function runs, not at import time.
LAZY_IMPORTS = {
    (
        "__init__.py",
        "__getattr__",
        "kproto.analyze.spark.jobs",
    ): "importing kproto.analyze.spark must not import pyarrow or numpy: the worker daemon sets its environment first",
    (
        "daemon.py",
        "prepare",
        "kproto.arrow.topic_names",
    ): "the daemon sets OPENBLAS_NUM_THREADS and jemalloc's options before numpy and pyarrow load",
}
#: Spark itself is imported where it is used: kproto.analyze.spark's workers, the report and the tests run without a
#: JVM, and importing pyspark costs about a second.
OPTIONAL_HEAVY = ("pyspark",)


def spark_modules() -> dict[str, ast.Module]:
    return {path.name: ast.parse(path.read_text(encoding="utf-8"), str(path)) for path in sorted(PACKAGE.glob("*.py"))}


def imported(node: ast.Import | ast.ImportFrom, package: str = "kproto.analyze.spark") -> list[str]:
    """The modules an import statement loads (``from kproto.analyze.spark import jobs`` loads kproto.analyze.spark.jobs)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:  # relative: from . import x / from .x import y
        base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def loaded(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement names: ``from x import y`` loads x, and y too when x is this package."""
    names = imported(node)
    if isinstance(node, ast.ImportFrom):
        return names[1:] if names[0] == "kproto.analyze.spark" else names[:1]
    return names


def imports_in_functions(tree: ast.Module) -> list[tuple[str, str]]:
    """(function, module) of every import inside a function (nested ones named by their outermost function)."""
    found = []

    def walk(node: ast.AST, function: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(child, function or child.name)
            elif isinstance(child, (ast.Import, ast.ImportFrom)) and function:
                found.extend((function, name) for name in loaded(child))
            else:
                walk(child, function)

    walk(tree, None)
    return found


def import_graph(trees: dict[str, ast.Module]) -> dict[str, set[str]]:
    """module -> the kproto.analyze.spark modules it imports (anywhere in it), the package's __init__ left out:
    every submodule loads it first, and it loads nothing at import time."""
    names = {f"kproto.analyze.spark.{file[:-3]}" for file in trees if file != "__init__.py"}
    graph: dict[str, set[str]] = {}
    for file, tree in trees.items():
        if file == "__init__.py":
            continue
        module = f"kproto.analyze.spark.{file[:-3]}"
        graph[module] = {
            name
            for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom))
            for name in imported(node)
            if name in names and name != module
        }
    return graph


def test_the_spark_package_imports_go_one_way():
    graph = import_graph(spark_modules())
    assert cycles(graph) == []
    # The worker side, top to bottom: a task dispatches to the readers, which use the worker's helpers.
    assert {
        "kproto.analyze.spark.range_pipeline",
        "kproto.analyze.spark.set_reader",
        "kproto.analyze.spark.worker",
    } <= graph["kproto.analyze.spark.task"]
    for reader in ("kproto.analyze.spark.range_pipeline", "kproto.analyze.spark.set_reader"):
        assert "kproto.analyze.spark.worker" in graph[reader] and "kproto.analyze.spark.task" not in graph[reader]
    assert graph["kproto.analyze.spark.worker"] <= {"kproto.analyze.spark.planning"}
    # Decoding sits between them: the readers and the task decode with it, it uses the worker's helpers only.
    assert graph["kproto.analyze.spark.decode"] <= {"kproto.analyze.spark.worker"}
    # follow ends a run as analyze does: through the job, never the other way.
    assert (
        "kproto.analyze.spark.jobs" in graph["kproto.analyze.spark.follow"]
        and "kproto.analyze.spark.follow" not in graph["kproto.analyze.spark.jobs"]
    )


def test_no_import_hides_in_a_function():
    found = {
        (file, function, module)
        for file, tree in spark_modules().items()
        for function, module in imports_in_functions(tree)
    }
    hidden = {entry for entry in found if not entry[2].startswith(OPTIONAL_HEAVY)}
    assert hidden == set(LAZY_IMPORTS), "import it at the top of the module (or name why not in LAZY_IMPORTS)"


def test_a_cycle_and_a_hidden_import_would_be_found():
    trees = {
        "__init__.py": ast.parse(""),
        "worker.py": ast.parse("from kproto.analyze.spark import planning\n"),
        "planning.py": ast.parse("def later():\n    from kproto.analyze.spark.worker import Sink\n"),
        "task.py": ast.parse("import kproto.analyze.spark.worker as W\nfrom . import planning\n"),
    }
    graph = import_graph(trees)
    assert graph["kproto.analyze.spark.task"] == {"kproto.analyze.spark.worker", "kproto.analyze.spark.planning"}
    assert cycles(graph) == [
        ["kproto.analyze.spark.planning", "kproto.analyze.spark.worker", "kproto.analyze.spark.planning"]
    ]
    assert imports_in_functions(trees["planning.py"]) == [("later", "kproto.analyze.spark.worker")]


# ------------------------------------------------------------------ one definition each
#: rule -> (fingerprint, the files allowed to hold it). The fingerprints match the pyarrow idiom
#: (kproto/analyze/spark/combine.py) and the Spark SQL idiom the rules were written in again (jobs.build_tables
#: before issue 39): see test_the_copies_that_were_folded_would_be_found.
RULES = {
    "connections: a connection several ranges read is one row, of the kind confirmed first in KINDS": (
        r"KINDS\.index|array_position\(F\.lit\(list\(KINDS\)\)",
        {"kproto/analyze/spark/combine.py"},
    ),
    "connections: the counters of every range add up": (
        r"row\[name\] = \(row\[name\] or 0\) \+|F\.sum\(name\)\.alias\(name\) for name in counters",
        {"kproto/analyze/spark/combine.py"},
    ),
    "clients: the software is name/version of its ApiVersions requests": (
        r'"/"\.join\(v for v in \(u\["client_software_name"\]|concat_ws\("/", "client_software_name"',
        {"kproto/analyze/spark/combine.py"},
    ),
    "clients: the most ApiVersions requests on one connection": (
        r'"_?handshakes"',
        {"kproto/analyze/spark/combine.py"},
    ),
    "clients: the fingerprint of a client row": (r"classify_row\(", {"kproto/analyze/spark/combine.py"}),
    "topics: an ID named by a response of the run, a name given its one ID": (
        r"name_of\.get\(|_name_of_id",
        {"kproto/analyze/spark/combine.py"},
    ),
    "topics: Produce requests and Fetch responses summed per side": (
        r"'requests' if prefix == 'produce' else 'responses'|alias\(\"fetch_responses\"\)",
        {"kproto/analyze/spark/combine.py"},
    ),
    "report: an ApiVersions request refused as unsupported (KIP-511) and the retry after it": (
        r'"error_code"\) == 35|\["error_code"\], 35\)|"error_code", "==", UNSUPPORTED_VERSION',
        {"kproto/analyze/spark/report_facts.py"},
    ),
    "report: requests per API version and the distinct clients sending them": (
        r'countDistinct\("client_ip", "client_id"\)|"clients": distinct\.get|\("clients", "distinct"',
        {"kproto/analyze/spark/report_facts.py"},
    ),
    "report: latency quantiles per API": (
        r'"latency_ns", (list\()?LATENCY_QUANTILES|for q in LATENCY_QUANTILES',
        {"kproto/analyze/spark/report_facts.py"},
    ),
    "report: connections that are not Kafka": (
        r'isin\("kafka", "empty"\)|\["kafka", "empty"\]|"not in", \("kafka", "empty"\)',
        {"kproto/analyze/spark/report_facts.py"},
    ),
    "end of a run: the summary and errors tables written": (
        r"schema=(J\.)?SUMMARY_SCHEMA\)",
        {"kproto/analyze/spark/jobs.py"},
    ),
    "end of a run: the small tables combined in the driver or by Spark": (
        r"(C\.)?combine\((rows|collected)\)|build_tables\(spark",
        {"kproto/analyze/spark/jobs.py"},
    ),
    "end of a run: the report's facts chosen and written": (r"\.write_report\(facts", {"kproto/analyze/spark/jobs.py"}),
}


def sources() -> dict[str, str]:
    """The Spark application's sources (the rules below are its own; kproto.analyze.fingerprint and kproto.versions
    define what they call)."""
    return {
        path.relative_to(ROOT).as_posix(): path.read_text(encoding="utf-8") for path in sorted(PACKAGE.glob("*.py"))
    }


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_is_written_in_its_one_place(rule):
    assert_one_place(rule, *RULES[rule], sources())


def defined(function: str, files: dict[str, str]) -> set[str]:
    return {name for name, text in files.items() if re.search(rf"^\s*def {function}\(", text, re.MULTILINE)}


def test_the_small_tables_the_report_facts_and_the_end_of_a_run_have_one_definition_each():
    files = sources()
    # The report's queries: written once, run by both executors.
    assert defined("run_arrow", files) == defined("run_spark", files) == {"kproto/analyze/spark/report_facts.py"}
    assert re.search(r"^QUERIES = \{", files["kproto/analyze/spark/report_facts.py"], re.MULTILINE)
    assert re.search(r"report_facts\.run_spark\(", files["kproto/analyze/spark/report.py"])
    assert re.search(r"report_facts\.run_arrow\(", files["kproto/analyze/spark/report.py"])
    for function in ("connections_table", "clients_table", "topics_table"):
        assert defined(function, files) == {"kproto/analyze/spark/combine.py"}, function
    # A topic named by its ID: the exchanges module's rule (tests/project/test_one_pairing.py), not the package's.
    assert defined("resolve_topic_ids", files) == set()
    assert defined("finish_run", files) == {"kproto/analyze/spark/jobs.py"}
    # analyze and --follow both end through it.
    assert re.search(r"\bfinish_run\(", files["kproto/analyze/spark/follow.py"])
    assert re.search(r"result = finish_run\(", files["kproto/analyze/spark/jobs.py"])


def test_the_copies_that_were_folded_would_be_found():
    # The Spark SQL restatement of the small tables and follow's own end of a run, as they were.
    old_build_tables = """
        _merged_kind(F.collect_set("kind")).alias("kind"),
        *[F.sum(name).alias(name) for name in counters])
    ranked = F.array_sort(F.transform(kinds, lambda k: F.array_position(F.lit(list(KINDS)), k)))
        F.sort_array(F.collect_set(F.concat_ws("/", "client_software_name", "client_software_version")))
        F.sum(F.when(F.col("api_key") == kv.API_VERSIONS_KEY, F.col("requests"))).alias("_handshakes"))
        return FP.classify_row(client_id, api_order, software_name, software_version, api_versions_per_connection)
        .withColumn("topic", F.coalesce(F.col("topic"), F.col("_name_of_id"))) \\
        F.sum(when(is_fetch, F.col("messages"))).alias("fetch_responses"),
"""
    old_report = """
    refused = with_address.filter((F.col("api_key") == 18) & (F.col("error_code") == 35))
        F.countDistinct("client_ip", "client_id").alias("clients"),
            F.percentile_approx("latency_ns", list(LATENCY_QUANTILES), 10000).alias("p"),
    others = tables["connections"].filter(~F.col("kind").isin("kafka", "empty"))
    refused = with_address.filter(pc.and_(is_api_versions, pc.equal(with_address["error_code"], 35)))
                            "clients": distinct.get((r["api_key"], r["api_version"]), 0),
                 for q in LATENCY_QUANTILES]
    others = connections.filter(pc.invert(pc.is_in(connections["kind"], pa.array(["kafka", "empty"]))))
"""
    old_follow = """
    tables = C.combine(rows)
    J.write_table(pa.Table.from_pylist(summary, schema=J.SUMMARY_SCHEMA), out, "summary")
        R.write_report(facts, Path(out))
"""
    files = {"old_jobs.py": old_build_tables, "old_follow.py": old_follow, "old_report.py": old_report}
    for rule, (pattern, _allowed) in RULES.items():
        expected = (
            {"old_follow.py"}
            if rule.startswith("end of a run")
            else {"old_report.py"}
            if rule.startswith("report")
            else {"old_jobs.py"}
        )
        assert places(pattern, files) == expected, rule
