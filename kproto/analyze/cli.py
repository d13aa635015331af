"""The ``kproto`` command.

``kproto --version`` prints the version and which implementation is active.
Everything else is a subcommand, each living in its own module so that adding
one never means editing a shared list:

* a module named ``kproto.cli_<name>`` (underscores become dashes in the
  command name) is found automatically;
* it defines ``add_arguments(parser)``, which adds its options to its own
  ``argparse`` sub-parser, and ``run(args) -> int``, which does the work and
  returns the exit status;
* the first line of its docstring (or a ``HELP`` string) is its one-line help.

Keep heavy imports (pyarrow, numpy...) inside ``run`` so that ``kproto --help``
stays fast. A subcommand whose module does not exist yet is simply not listed;
one whose module exists but fails to import is listed as unavailable, with the
reason, and running it exits with status 2 rather than hiding the failure.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import pkgutil
import platform
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from kproto import _impl
from kproto._version import __version__

# Subcommands planned or shipped, in the order ``kproto --help`` lists them.
# Any other ``kproto.analyze.cli_*`` module is discovered and listed after these, so a
# new subcommand needs no edit here (add it here only to choose its position).
SUBCOMMANDS: tuple[tuple[str, str], ...] = (
    ("dump", "kproto.analyze.cli_dump"),
    ("decode", "kproto.analyze.cli_decode"),
    ("analyze", "kproto.analyze.cli_analyze"),
    ("versions", "kproto.analyze.cli_versions"),
)

_MODULE_PREFIX = "cli_"
#: The exit status of a command whose optional package (an extra) is not installed.
EXIT_MISSING_EXTRA = 2


@dataclass
class Subcommand:
    """One ``kproto <name>`` subcommand, backed by a module."""

    name: str
    module_path: str
    module: ModuleType | None = None
    import_error: BaseException | None = None

    @property
    def help(self) -> str:
        if self.module is None:
            return f"(unavailable: {self.import_error})"
        text = getattr(self.module, "HELP", None) or (self.module.__doc__ or "").strip()
        return text.splitlines()[0] if text else ""

    @property
    def exit_statuses(self) -> str | None:
        """The "Exit status: ..." paragraph of the module's docstring, shown at the end of its --help."""
        doc = (self.module.__doc__ or "") if self.module is not None else ""
        for paragraph in doc.split("\n\n"):
            if paragraph.strip().startswith("Exit status"):
                return " ".join(paragraph.split())
        return None


def implementation_description() -> str:
    """Which implementation is active, and why, in a few words."""
    if _impl.USE_EXTENSION:
        return "Cython extension"
    if _impl.NO_EXTENSIONS:
        return "pure Python (KPROTO_NO_EXTENSIONS is set)"
    if _impl.PURE_INSTALL:
        return "pure Python (installed without the compiled extension)"
    return "pure Python (compiled extension not available)"


def version_text() -> str:
    """The text ``kproto --version`` prints."""
    return (
        f"kproto {__version__}\n"
        f"implementation: {implementation_description()}\n"
        f"python: {platform.python_implementation()} {platform.python_version()} ({sys.platform})"
    )


class _PrintVersion(argparse.Action):
    """``--version`` printing :func:`version_text` as is (argparse's own action rewraps it)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="print the version and the active implementation, then exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(version_text())
        parser.exit(0)


def _discovered_module_paths() -> list[str]:
    """``kproto.analyze.cli_*`` modules present in the installed package."""
    import kproto.analyze

    return sorted(
        f"kproto.analyze.{info.name}"
        for info in pkgutil.iter_modules(kproto.analyze.__path__)
        if info.name.startswith(_MODULE_PREFIX)
    )


def _name_for(module_path: str) -> str:
    return module_path.rsplit(".", 1)[-1][len(_MODULE_PREFIX) :].replace("_", "-")


def _module_exists(module_path: str) -> bool:
    try:
        return importlib.util.find_spec(module_path) is not None
    except (ImportError, ValueError):  # a parent package is missing, or a module without a spec
        return False


def find_subcommands() -> list[Subcommand]:
    """The subcommands available in this installation, in listing order:
    :data:`SUBCOMMANDS` first, then any other ``kproto.analyze.cli_*`` module."""
    discovered = _discovered_module_paths()
    entries = list(SUBCOMMANDS)
    known_paths = {path for _, path in entries}
    entries += [(_name_for(path), path) for path in discovered if path not in known_paths]

    found: list[Subcommand] = []
    seen_names: set[str] = set()
    for name, module_path in entries:
        if name in seen_names or not _module_exists(module_path):
            continue
        seen_names.add(name)
        command = Subcommand(name, module_path)
        try:
            command.module = importlib.import_module(module_path)
            missing = [attr for attr in ("add_arguments", "run") if not callable(getattr(command.module, attr, None))]
            if missing:
                raise ImportError(f"{module_path} does not define {', '.join(missing)}")
        except Exception as exc:  # a broken subcommand must not take the whole CLI down
            command.module = None
            command.import_error = exc
        found.append(command)
    return found


def build_parser(subcommands: Sequence[Subcommand]) -> argparse.ArgumentParser:
    """The top-level parser with one sub-parser per subcommand."""
    parser = argparse.ArgumentParser(
        prog="kproto",
        description="Apache Kafka wire-protocol codec and capture analysis.",
    )
    parser.add_argument("--version", action=_PrintVersion)
    if subcommands:
        sub = parser.add_subparsers(dest="command", metavar="COMMAND")
        for command in subcommands:
            sub_parser = sub.add_parser(
                command.name, help=command.help, description=command.help, epilog=command.exit_statuses
            )
            if command.module is not None:
                command.module.add_arguments(sub_parser)
            sub_parser.set_defaults(_subcommand=command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kproto`` console script; returns the exit status.

    A reader that stops early (``kproto versions | head``) closes the pipe: the
    rest of the output is unwanted, so that is a quiet, successful exit rather
    than a BrokenPipeError traceback.
    """
    try:
        try:
            return _main(argv)
        finally:
            # flush here, not at interpreter exit, so a closed pipe is caught below
            # (also after argparse's --help / --version, which end in SystemExit)
            sys.stdout.flush()
    except BrokenPipeError:
        # Python would flush stdout again at exit and print "Exception ignored ...":
        # point it at /dev/null so that flush has nowhere to fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def _main(argv: Sequence[str] | None) -> int:
    subcommands = find_subcommands()
    parser = build_parser(subcommands)
    args = parser.parse_args(argv)
    command: Subcommand | None = getattr(args, "_subcommand", None)
    if command is None:  # plain ``kproto``: say what it can do
        parser.print_help()
        return 0
    if command.module is None:
        print(f"kproto {command.name}: unavailable: {command.import_error}", file=sys.stderr)
        return 2
    try:
        status = command.module.run(args)
    except ImportError as exc:
        # An optional package this command needs is missing: one line naming the extra, no traceback.
        from kproto._extras import missing_package_message

        message = missing_package_message(exc.name)
        if message is None:
            raise
        print(f"kproto {command.name}: {message}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
