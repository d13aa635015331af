"""What users get from ``pip install kproto``: one version, a working command, a
source distribution that builds, and a release configuration that covers the
promised platforms.

The quick checks run in the normal suite. The full proof (build, auditwheel,
install into a compiler-free environment, run the tests there) is
``scripts/build-proof.sh``; it runs here only with ``KPROTO_RUN_SLOW=1``.
"""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import tarfile
import types
from pathlib import Path

import pytest

import kproto
from kproto import _impl
from kproto._version import __version__
from kproto.analyze import cli

ROOT = Path(__file__).resolve().parents[2]
HAS_SOURCE_TREE = (ROOT / "setup.py").is_file() and (ROOT / "kproto" / "_version.py").is_file()
needs_source_tree = pytest.mark.skipif(not HAS_SOURCE_TREE, reason="needs the kproto source tree")

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]


def _pyproject() -> dict:
    if tomllib is None:
        pytest.skip("tomllib needs Python 3.11+")
    with open(ROOT / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


# --- one version ---------------------------------------------------------------------------------


def test_version_is_pep440_and_exported() -> None:
    assert kproto.__version__ == __version__
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?", __version__), __version__


def test_installed_metadata_matches_version_module() -> None:
    try:
        installed = importlib.metadata.version("kproto")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("kproto is imported from a source tree that is not installed")
    if Path(kproto.__file__).resolve().parent.parent == ROOT and installed != __version__:
        pytest.skip("source tree imported, but a different kproto version is installed beside it")
    assert installed == __version__


@needs_source_tree
def test_version_lives_only_in_version_module() -> None:
    project = _pyproject()["project"]
    assert "version" not in project and "version" in project["dynamic"]
    # Any other file spelling out the version is a second place to forget on release.
    literal = re.compile(r"""(?<![\w-])(__version__|version)\s*[=:]\s*["']\d+\.\d+""")
    offenders = []
    for path in [ROOT / "setup.py", ROOT / "pyproject.toml", *(ROOT / "kproto").rglob("*.py")]:
        if path.name == "_version.py":
            continue
        if literal.search(path.read_text(encoding="utf-8", errors="replace")):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


# --- the kproto command --------------------------------------------------------------------------


def test_version_text_names_version_and_implementation() -> None:
    text = cli.version_text()
    assert text.splitlines()[0] == f"kproto {__version__}"
    expected = "Cython extension" if _impl.USE_EXTENSION else "pure Python"
    assert f"implementation: {expected}" in text


@pytest.mark.parametrize("no_extensions", ["1", ""])
def test_kproto_version_command(no_extensions: str) -> None:
    env = {**os.environ, "KPROTO_NO_EXTENSIONS": no_extensions}
    env.pop("PYTHONWARNINGS", None)
    # From the directory holding the kproto this test imported, `-m` loads that same copy.
    done = subprocess.run(
        [sys.executable, "-W", "ignore::RuntimeWarning", "-m", "kproto.analyze.cli", "--version"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(kproto.__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"kproto {__version__}"
    if no_extensions:
        assert lines[1] == "implementation: pure Python (KPROTO_NO_EXTENSIONS is set)"
    else:
        assert lines[1].startswith("implementation: ")
        assert ("Cython extension" in lines[1]) == _impl._can_import_extension()


def test_plain_kproto_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 0
    assert "usage: kproto" in capsys.readouterr().out


def _fake_subcommand(name: str) -> types.ModuleType:
    module = types.ModuleType(name, f"Say hello.\n\nLonger text for {name}.")

    def add_arguments(parser):
        parser.add_argument("--who", default="world")

    def run(args) -> int:
        print(f"hello {args.who}")
        return 3

    module.add_arguments = add_arguments  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    return module


def test_subcommands_registered_discovered_missing_and_broken(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "kproto_test_cli_hello", _fake_subcommand("kproto_test_cli_hello"))
    monkeypatch.setitem(sys.modules, "kproto_test_cli_extra_thing", _fake_subcommand("kproto_test_cli_extra_thing"))
    broken = types.ModuleType("kproto_test_cli_broken")  # has neither add_arguments nor run
    monkeypatch.setitem(sys.modules, "kproto_test_cli_broken", broken)
    # find_spec() of a module already in sys.modules needs a __spec__.
    for module_name in ("kproto_test_cli_hello", "kproto_test_cli_extra_thing", "kproto_test_cli_broken"):
        sys.modules[module_name].__spec__ = importlib.machinery.ModuleSpec(module_name, None)

    registry = (
        ("hello", "kproto_test_cli_hello"),
        ("not-written-yet", "kproto_test_cli_absent"),
        ("broken", "kproto_test_cli_broken"),
    )
    monkeypatch.setattr(cli, "SUBCOMMANDS", registry)
    monkeypatch.setattr(cli, "_discovered_module_paths", lambda: ["kproto_test_cli_extra_thing"])
    monkeypatch.setattr(cli, "_MODULE_PREFIX", "kproto_test_cli_")

    found = cli.find_subcommands()
    assert [c.name for c in found] == ["hello", "broken", "extra-thing"]
    assert found[0].help == "Say hello."
    assert "unavailable" in found[1].help and "add_arguments, run" in found[1].help

    assert cli.main(["hello", "--who", "kafka"]) == 3
    assert capsys.readouterr().out == "hello kafka\n"
    assert cli.main(["extra-thing"]) == 3
    assert cli.main(["broken"]) == 2
    assert "unavailable" in capsys.readouterr().err

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["not-written-yet"])
    assert exit_info.value.code == 2


def test_entry_point_declared() -> None:
    try:
        scripts = importlib.metadata.entry_points(group="console_scripts", name="kproto")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover
        scripts = ()
    if not scripts:
        project = _pyproject()["project"]
        assert project["scripts"]["kproto"] == "kproto.analyze.cli:main"
    else:
        assert next(iter(scripts)).value == "kproto.analyze.cli:main"


# --- what ships ----------------------------------------------------------------------------------


def test_py_typed_and_license_present() -> None:
    assert (Path(kproto.__file__).parent / "py.typed").is_file()
    if HAS_SOURCE_TREE:
        license_text = (ROOT / "LICENSE").read_text(encoding="utf-8")
        assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
        assert "END OF TERMS AND CONDITIONS" in license_text


@needs_source_tree
def test_sdist_carries_cython_sources_and_no_generated_files(tmp_path: Path) -> None:
    """Build the sdist through the PEP 517 hook (no network, no Cython needed) and list it."""
    pytest.importorskip("setuptools")
    env = {**os.environ, "KPROTO_NO_EXTENSIONS": "1"}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))",
            str(tmp_path),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    sdist = tmp_path / done.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        names = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}

    wanted = {
        str(path.relative_to(ROOT)).replace(os.sep, "/")
        for path in (ROOT / "kproto").rglob("*")
        if path.suffix in (".pyx", ".pxd", ".h") or path.name == "py.typed"
    }
    assert any(name.endswith(".pyx") for name in wanted)
    assert wanted <= names, sorted(wanted - names)
    for name in ("LICENSE", "CHANGELOG.md", "setup.py", "pyproject.toml", "tests/conftest.py"):
        assert name in names
    shipped_generated = sorted(n for n in names if n.endswith((".c", ".so", ".pyd", ".o", ".html")))
    assert shipped_generated == []


# --- release configuration -----------------------------------------------------------------------


@needs_source_tree
def test_cibuildwheel_targets_and_wheel_test() -> None:
    config = _pyproject()["tool"]["cibuildwheel"]
    assert config["build"] == [f"cp3{minor}-*" for minor in range(10, 15)]
    assert config["linux"]["archs"] == ["x86_64", "aarch64"]
    assert config["macos"]["archs"] == ["x86_64", "arm64"]
    assert config["windows"]["archs"] == ["AMD64"]
    assert "*-musllinux_aarch64" in config["skip"] and not any("musllinux_x86_64" in s for s in config["skip"])
    commands = config["test-command"]
    assert any("kproto.extension_loaded()" in c for c in commands)
    assert any("pytest tests" in c and "not spark" in c for c in commands)
    assert "tests" in config["test-sources"]


@needs_source_tree
def test_workflow_actions_are_pinned() -> None:
    workflows = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
    assert {w.name for w in workflows} >= {"ci.yml", "wheels.yml", "release.yml"}
    uses = []
    for workflow in workflows:
        for line in workflow.read_text(encoding="utf-8").splitlines():
            match = re.match(r"\s*(?:-\s*)?uses:\s*(\S+)", line)
            if match and not match.group(1).startswith("./"):
                uses.append((workflow.name, match.group(1), line))
    assert uses
    for name, action, line in uses:
        # A full commit SHA with the release it stands for in a comment.
        assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", action), (name, action)
        assert re.search(r"#\s*v\d+\.\d+\.\d+", line), (name, line)


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("KPROTO_RUN_SLOW") != "1", reason="set KPROTO_RUN_SLOW=1 for the full build proof")
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="auditwheel is Linux-only")
@needs_source_tree
def test_full_build_proof() -> None:
    """sdist + wheel, auditwheel, install with no compiler, tests against the wheel."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-proof.sh")], cwd=ROOT, capture_output=True, text=True, timeout=3600
    )
    assert done.returncode == 0, (done.stdout[-5000:], done.stderr[-5000:])
    assert "build proof passed" in done.stdout


# --- a quiet, incremental set-up -----------------------------------------------------------------


@needs_source_tree
def test_license_is_an_spdx_expression_without_classifiers() -> None:
    """PEP 639 metadata: setuptools prints deprecation banners for the table form and classifiers."""
    pyproject = _pyproject()
    project = pyproject["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert not [c for c in project["classifiers"] if c.startswith("License ::")]
    # setuptools reads the SPDX string and license-files from 77.0 on.
    requires = pyproject["build-system"]["requires"]
    assert "setuptools>=77" in requires, requires


def _module_from(path, name: str) -> types.ModuleType:
    """A script of the checkout loaded as a module, without running it as a program."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _setup_module() -> types.ModuleType:
    """setup.py as a module (its setup() call is behind ``__name__ == "__main__"``)."""
    return _module_from(ROOT / "setup.py", "kproto_setup_py")


@needs_source_tree
def test_build_folder_cannot_shadow_a_package() -> None:
    """`python -m build` in the checkout must find the build package, not setuptools' folder."""
    build_base = _setup_module().BUILD_BASE
    assert not build_base.isidentifier(), build_base
    assert ("prune " + build_base) in (ROOT / "MANIFEST.in").read_text(encoding="utf-8")


@needs_source_tree
@pytest.mark.parametrize("pure", [True, False])
def test_build_info_records_how_the_package_was_built(pure: bool) -> None:
    setup_py = _setup_module()
    assert setup_py.pure_build({"KPROTO_NO_EXTENSIONS": "1"}) and not setup_py.pure_build({})
    namespace: dict = {}
    exec(setup_py.build_info_source(pure), namespace)
    assert namespace["EXTENSION_BUILT"] is (not pure)


_IMPORT_WITHOUT_EXTENSION = """
import sys, types, warnings
sys.modules["kproto._c._buffer"] = None          # the extension cannot be imported
if sys.argv[1] == "pure":
    info = types.ModuleType("kproto._build_info")
    info.EXTENSION_BUILT = False
    sys.modules["kproto._build_info"] = info
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import kproto
    from kproto import _impl
print(kproto.extension_loaded(), _impl.PURE_INSTALL, [str(w.message) for w in caught])
"""


@pytest.mark.parametrize("installed", ["pure", "with-extension"])
def test_pure_install_does_not_warn_but_a_broken_extension_does(installed: str) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("KPROTO_NO_EXTENSIONS", "PYTHONWARNINGS")}
    done = subprocess.run(
        [sys.executable, "-c", _IMPORT_WITHOUT_EXTENSION, installed],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(kproto.__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    loaded, pure, messages = done.stdout.strip().split(" ", 2)
    assert loaded == "False"
    if installed == "pure":
        assert (pure, messages) == ("True", "[]")
    else:
        assert pure == "False" and "compiled extension not available" in messages


_CAPTURE_WITHOUT_NUMPY = """
import sys
sys.modules["numpy"] = None
sys.modules["pyarrow"] = None
from kproto.arrow.capture import CaptureReader, read_capture   # importing needs neither
for call in (lambda: read_capture(b""), lambda: CaptureReader(b"", implementation="py")):
    try:
        call()
    except ImportError as exc:
        print(exc)
try:
    import kproto.arrow.frames
except ImportError as exc:
    print(exc)
"""


def test_capture_and_batch_without_numpy_name_the_extra() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}
    done = subprocess.run(
        [sys.executable, "-c", _CAPTURE_WITHOUT_NUMPY],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=Path(kproto.__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    hint = "pip install 'kproto[arrow]' (from a checkout: pip install '.[arrow]')"
    assert lines == [
        f"kproto.arrow.capture needs numpy and pyarrow (numpy is missing): {hint}",
        f"kproto.arrow.capture needs numpy and pyarrow (numpy is missing): {hint}",
        f"kproto.arrow.frames needs numpy and pyarrow (numpy is missing): {hint}",
    ]


def _extra_requirements_module() -> types.ModuleType:
    return _module_from(ROOT / "scripts" / "extra_requirements.py", "kproto_extra_requirements")


@needs_source_tree
def test_extra_requirements_lists_only_the_extras_asked_for() -> None:
    extras = _extra_requirements_module()
    pyproject = {"project": {"optional-dependencies": {"a": ["x>=1", "y"], "b": ["y", "z"], "c": ["w"]}}}
    assert extras.extra_requirements(pyproject, ["b"]) == ["y", "z"]
    assert extras.extra_requirements(pyproject, ["a", "b"]) == ["x>=1", "y", "z"]
    with pytest.raises(KeyError, match="no extra nope"):
        extras.extra_requirements(pyproject, ["nope"])
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "extra_requirements.py"), "spark"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == _pyproject()["project"]["optional-dependencies"]["spark"]
