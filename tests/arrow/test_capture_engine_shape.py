"""The capture engine's shape (issue 39 item 6): both implementations are the same three
stages, classes of the same names with the same public methods, and their engines satisfy
the one contract kproto.arrow.capture relies on (kproto/_common/capture_engine.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kproto import _impl
from kproto._common import capture_engine
from kproto._common.capture_engine import CaptureEngine, FramerStage, ReassemblyStage, RecordReaderStage
from kproto.arrow.capture import request_versions

ROOT = Path(__file__).resolve().parents[2]
STAGES = {"RecordReader": RecordReaderStage, "Reassembly": ReassemblyStage, "Framer": FramerStage}


def members(protocol: type) -> set[str]:
    """The names a protocol asks for: its methods and its annotated attributes, its bases' too."""
    asked = [cls for cls in protocol.__mro__ if cls.__module__ == capture_engine.__name__]
    return {
        name
        for cls in asked
        for name in (*vars(cls), *vars(cls).get("__annotations__", {}))
        if not name.startswith("_")
    }


def methods(cls: type) -> set[str]:
    """The public methods of a class (attributes aside)."""
    return {name for name in dir(cls) if not name.startswith("_") and callable(getattr(cls, name))}


@pytest.fixture(params=_impl.available())
def module(request):
    return _impl.load("capture", request.param)


def test_the_engine_is_the_shared_one_given_its_stages(module):
    engine = module.Engine(request_versions(), broker_ports=(9092,), max_frame_size=1 << 40)
    assert isinstance(engine, capture_engine.Engine) and isinstance(engine, CaptureEngine)
    assert engine.max_frame_size == capture_engine.SETTING_LIMIT  # the shared caps
    for attribute, name in (("reader", "RecordReader"), ("reassembly", "Reassembly"), ("framer", "Framer")):
        stage = getattr(engine, attribute)
        assert type(stage) is getattr(module, name)
        assert isinstance(stage, STAGES[name]), name


@pytest.mark.parametrize("name", sorted(STAGES))
def test_each_stage_has_exactly_the_contract_s_public_methods(module, name):
    protocol = STAGES[name]
    assert methods(getattr(module, name)) == methods(protocol), name


def test_both_implementations_have_the_same_stage_classes():
    modules = [_impl.load("capture", name) for name in _impl.available()]
    if len(modules) < 2:
        pytest.skip("only one implementation is available here (no build, or KPROTO_NO_EXTENSIONS=1)")
    compiled, twin = modules
    for name in STAGES:
        assert methods(getattr(compiled, name)) == methods(getattr(twin, name)), name


def test_the_arrow_layer_uses_only_the_contract():
    source = (ROOT / "kproto" / "arrow" / "capture.py").read_text()
    used = set(re.findall(r"\b(?:self\._engine|engine)\.(\w+)", source))
    assert used and used <= members(CaptureEngine), used - members(CaptureEngine)
    assert members(CaptureEngine) >= {"feed", "finish", "take_batch", "error"}
