"""Shared test set-up.

The ``impl`` fixture runs a test once per implementation ("c" and "py"); use
``impl.load("buffer")`` to get that implementation's module. The test command runs
the suite, then the test modules marked ``twin`` (chosen from their imports by
tests/twin_selection.py) a second time with KPROTO_NO_EXTENSIONS=1.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kproto import _impl

from .twin_selection import is_twin_module

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "kafka-protocol"

settings.register_profile(
    "ci", max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow],
    derandomize=True, print_blob=True,
)
settings.register_profile(
    "long", max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class Implementation:
    def __init__(self, name: str) -> None:
        self.name = name

    def load(self, module: str):
        return _impl.load(module, self.name)

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(params=_impl.available())
def impl(request) -> Implementation:
    return Implementation(request.param)


@pytest.fixture(scope="session")
def shared_protocol_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/kafka-protocol is not beside the checkout")
    return SHARED


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "twin: run again on the pure-Python twin by scripts/test.sh (set from the "
        "module's imports by tests/twin_selection.py, never by hand)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    twin_by_path: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path not in twin_by_path:
            twin_by_path[path] = path.suffix == ".py" and is_twin_module(path.read_text(encoding="utf-8"))
        if twin_by_path[path]:
            item.add_marker("twin")
