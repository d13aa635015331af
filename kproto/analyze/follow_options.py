"""The ``--follow`` options of ``kproto analyze`` (kproto/analyze/spark/follow.py does the work).

    kproto analyze /captures/ --out out/ --follow --trigger 10 --settle 30
    kproto analyze /captures/ --out out/ --once          # what is closed now, then exit (cron)

Kept apart from kproto/analyze/cli_analyze.py so that the plain command reads as before; not named
cli_*.py, which would make it a subcommand of its own (kproto/analyze/cli.py finds those).
"""

from __future__ import annotations

import argparse
import sys


class UsageError(Exception):
    """Following cannot start as asked (remote paths, a checkpoint of other options): exit status 2."""


def _seconds(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text}")
    return value


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError("must be more than 0")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "following a directory",
        "keep watching local PATHs (directories, globs) and add each file once it is closed, i.e. "
        "not modified for --settle seconds; a checkpoint lets a stopped run resume without counting "
        "a file twice (docs/analyze.md, 'Following a directory')",
    )
    group.add_argument(
        "--follow",
        action="store_true",
        help="process closed files as they arrive until SIGINT/SIGTERM (the current batch "
        "finishes and is committed first)",
    )
    group.add_argument("--once", action="store_true", help="like --follow, but process the files closed now and exit")
    group.add_argument(
        "--max-batches", type=int, default=None, metavar="N", help="like --follow, but exit after N batches"
    )
    group.add_argument(
        "--trigger",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="seconds between listings of the inputs (default 10)",
    )
    group.add_argument(
        "--settle",
        type=_seconds,
        default=30.0,
        metavar="SECONDS",
        help="a file not modified for this long is closed and taken (default 30)",
    )
    group.add_argument(
        "--report-interval",
        type=_seconds,
        default=60.0,
        metavar="SECONDS",
        help="rewrite the report at most this often (default 60; the tables are rewritten "
        "after every batch, the report also at exit)",
    )
    group.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="where the processed files and their compact rows are kept (default OUT/_follow)",
    )


def wanted(args: argparse.Namespace) -> bool:
    """The command line asks to follow."""
    return bool(args.follow or args.once or args.max_batches is not None)


def run(args: argparse.Namespace, spark, options):
    """Follow ``args.paths`` into ``args.out``: the final :class:`kproto.analyze.spark.jobs.Result`."""
    from kproto.analyze.spark.follow import FollowOptions, FollowSetupError, follow

    how = FollowOptions(
        trigger=args.trigger,
        settle=args.settle,
        report_interval=args.report_interval,
        checkpoint=args.checkpoint,
        once=args.once,
        max_batches=args.max_batches,
    )

    def log(text: str) -> None:
        if not args.quiet:
            print(f"kproto analyze --follow: {text}", file=sys.stderr, flush=True)

    try:
        return follow(args.paths, args.out, spark=spark, options=options, follow_options=how, log=log)
    except FollowSetupError as exc:
        raise UsageError(str(exc)) from exc
