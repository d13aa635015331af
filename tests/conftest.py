"""Shared test set-up.

The ``impl`` fixture runs a test once per implementation ("c" and "py"); use
``impl.load("buffer")`` to get that implementation's module. The test command runs
the suite, then the test modules marked ``twin`` (chosen from their imports by
tests/twin_selection.py) a second time with KPROTO_NO_EXTENSIONS=1.

The ``kafka_broker`` fixture gives a real Apache Kafka broker (tools/kafka_broker.py) of
the release a test is parametrized with (``kafka_release``; ``kafka_brokers.get(release)``
for any other); tests using it are marked
``kafka`` and run by ``make test-kafka``. One broker is alive at a time, and the kafka
tests are run grouped by release, so each release starts once per session.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kproto import _impl

from .twin_selection import implementations, is_twin_module

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "kafka-protocol"

settings.register_profile(
    "ci",
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
    print_blob=True,
)
settings.register_profile(
    "long",
    max_examples=2000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


class Implementation:
    def __init__(self, name: str) -> None:
        self.name = name

    def load(self, module: str):
        return _impl.load(module, self.name)

    def __repr__(self) -> str:
        return self.name


@pytest.fixture(params=implementations())
def impl(request) -> Implementation:
    return Implementation(request.param)


@pytest.fixture(scope="session")
def shared_protocol_dir() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/kafka-protocol is not beside the checkout")
    return SHARED


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "twin: run again on the pure-Python twin by scripts/test.sh (set from the "
        "module's imports by tests/twin_selection.py, never by hand)",
    )


def mark_twin_modules(items: list[pytest.Item]) -> None:
    """The ``twin`` marker on the tests of the modules tests/twin_selection.py chooses."""
    twin_by_path: dict[Path, bool] = {}
    for item in items:
        path = Path(item.path)
        if path not in twin_by_path:
            twin_by_path[path] = path.suffix == ".py" and is_twin_module(path.read_text(encoding="utf-8"))
        if twin_by_path[path]:
            item.add_marker("twin")


def broker_tool():
    """tools/kafka_broker.py, imported when a kafka test needs it: the wheel tests run a copy of
    tests/ alone, without tools/, and deselect the kafka tests."""
    tools = str(ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    import kafka_broker

    return kafka_broker


@pytest.fixture(scope="session")
def kafka_brokers():
    """One real broker at a time (kafka_broker.BrokerPool), all stopped at the end of the session."""
    pool = broker_tool().BrokerPool()
    yield pool
    pool.close()


@pytest.fixture
def kafka_broker(kafka_brokers, kafka_release):
    """The running broker of ``kafka_release`` (a test parameter), started if need be."""
    return kafka_brokers.get(kafka_release)


def pytest_collection_modifyitems(config, items):
    """The twin marker, then the kafka tests grouped by release (stable otherwise), so that
    each broker starts once."""
    mark_twin_modules(items)
    kafka_items = [item for item in items if item.get_closest_marker("kafka")]
    if not kafka_items:
        return
    order = {release: index for index, release in enumerate(broker_tool().releases())}

    def release_of(item) -> int:
        callspec = getattr(item, "callspec", None)
        release = callspec.params.get("kafka_release") if callspec else None
        return order.get(release, -1)

    positions = [i for i, item in enumerate(items) if item.get_closest_marker("kafka") and release_of(item) >= 0]
    for position, item in zip(positions, sorted((items[i] for i in positions), key=release_of)):
        items[position] = item
