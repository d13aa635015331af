"""The short fuzz budget of the normal test suite (the long one: python -m tests.fuzz.run).

Each target runs a fixed number of mutated inputs from a fixed seed, so a
failure reproduces exactly; together they take some tens of seconds. Each input
goes through every available implementation: with the extension built, the
Cython and pure-Python decoders must agree; under KPROTO_NO_EXTENSIONS=1 the
twin alone must only ever raise DecodeError. Inputs that once failed live in
tests/fuzz/regressions/ and are replayed every time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kproto.errors import DecodeError, TruncatedError
from tests.fuzz import corpus, run, targets

# Executions per target: one to five seconds each on the project's 2-core machine.
BUDGET = {
    "request_header": 50_000,
    "request": 60_000,
    "response": 60_000,
    "records": 20_000,
    "capture": 3_000,
    "tcp": 2_000,
    "framing": 40_000,
    "batch": 1_500,
}
REGRESSIONS = Path(__file__).resolve().parents[1] / "fuzz" / "regressions"


def _describe(stats: run.Stats) -> str:
    lines = [f"{len(stats.failures)} failing input(s) in {stats.executions} runs of {stats.target}:"]
    for failure in stats.failures[:3]:
        lines.append(f"  {failure.kind}: {failure.message}\n  input: {failure.data[:200].hex()}")
    return "\n".join(lines)


def test_every_target_has_a_budget_and_seeds():
    assert set(BUDGET) == set(targets.TARGETS)
    for name in targets.TARGETS:
        assert corpus.seeds(name), name


@pytest.mark.parametrize("name", ["request_header", "request", "response"])
def test_message_seeds_are_valid_encodings(name):
    # seeds that fail to decode would make the fuzzer start from the front door
    for data in corpus.seeds(name):
        outcome = targets.TARGETS[name](data)
        assert outcome[0] == "ok", (name, data[:40].hex(), outcome)


def test_seeds_cover_every_message_version():
    requests = {
        (int.from_bytes(s[0:2], "big", signed=True), int.from_bytes(s[2:4], "big", signed=True))
        for s in corpus.seeds("request")
    }
    responses = {(s[0], s[1]) for s in corpus.seeds("response")}
    expected_requests = sum(hi - lo + 1 for _key, lo, hi in _request_versions())
    assert len(requests) == expected_requests
    assert len(responses) == sum(hi - lo + 1 for _key, lo, hi in targets.RESPONSE_APIS)


def _request_versions():
    from kproto import schema

    for api_key in schema.api_keys():
        name = schema.request_name(api_key)
        if name is not None:
            lo, hi = schema.spec(name)["valid_versions"]
            yield api_key, lo, hi


@pytest.mark.parametrize("name", sorted(BUDGET))
def test_short_fuzz_budget(name):
    stats = run.fuzz(name, runs=BUDGET[name], seed=0, crash_dir=None, slow=float("inf"))
    assert stats.executions == BUDGET[name]
    assert not stats.failures, _describe(stats)
    # the mutants must reach past the first check: some decode, some fail in several ways
    assert len(stats.outcomes) >= 2, stats.outcomes


@pytest.mark.parametrize("path", sorted(REGRESSIONS.glob("*.bin")), ids=lambda p: p.name)
def test_inputs_that_once_failed(path):
    target = next(name for name in sorted(targets.TARGETS, key=len, reverse=True) if path.name.startswith(name + "-"))
    targets.TARGETS[target](path.read_bytes())


# ---------------------------------------------------------------- the harness itself
def test_harness_reports_an_exception_that_is_not_a_decode_error(monkeypatch):
    real = targets._CODECS[targets.IMPLEMENTATIONS[-1]]

    class Broken:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def decode_request(data):
            if len(data) % 7 == 3:
                raise IndexError("a bounds check is missing")
            return real.decode_request(data)

    monkeypatch.setitem(targets._CODECS, targets.IMPLEMENTATIONS[-1], Broken())
    stats = run.fuzz("request", runs=2000, crash_dir=None, slow=float("inf"))
    assert stats.failures and "IndexError" in stats.failures[0].message


def test_harness_reports_implementations_that_disagree(monkeypatch):
    if len(targets.IMPLEMENTATIONS) < 2:
        pytest.skip("one implementation: nothing to compare")
    real = targets._CODECS["py"]

    class Different:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def decode_request_header_info(data):
            if len(data) > 20:
                raise TruncatedError("pretend", 0)
            return real.decode_request_header_info(data)

    monkeypatch.setitem(targets._CODECS, "py", Different())
    stats = run.fuzz("request_header", runs=500, crash_dir=None, slow=float("inf"))
    assert stats.failures and "disagree" in stats.failures[0].message


def test_decode_errors_are_outcomes_not_failures():
    assert issubclass(TruncatedError, DecodeError)
    assert targets.fuzz_request(b"\x00")[0] == "error"


@pytest.mark.parametrize("change", ["reason", "offset", "path"])
def test_harness_reports_errors_that_differ_in_more_than_class(monkeypatch, change):
    # the same error class is not enough: a user reads the reason, offset and path too
    if len(targets.IMPLEMENTATIONS) < 2:
        pytest.skip("one implementation: nothing to compare")
    real = targets._CODECS["py"]

    class Reworded:
        def __getattr__(self, name):
            return getattr(real, name)

        @staticmethod
        def decode_request(data):
            try:
                return real.decode_request(data)
            except DecodeError as exc:
                reason, offset, path = exc.reason, exc.offset, exc.path
                if change == "reason":
                    reason += " (reworded)"
                elif change == "offset":
                    offset = (offset or 0) + 1
                else:
                    path = f"{path}.other"
                raise type(exc)(reason, offset, path, exc.api_key, exc.api_version) from None

    monkeypatch.setitem(targets._CODECS, "py", Reworded())
    # past the seeds, which all decode: the mutants are what fail
    stats = run.fuzz("request", runs=len(corpus.seeds("request")) + 500, crash_dir=None, slow=float("inf"))
    assert stats.failures and "disagree" in stats.failures[0].message


def test_the_records_target_compares_error_reasons_and_offsets(monkeypatch):
    """Record sets must fail alike in both implementations: same class is not enough."""
    if len(targets.IMPLEMENTATIONS) < 2:
        pytest.skip("one implementation: nothing to compare")
    from kproto._py import records_v2 as twin  # where the magic 2 reader lives
    from kproto.errors import CorruptRecordError
    from tests import hostile_records as hostile

    data = targets.records_options(verify_crc=True, small_cap=False) + hostile.v2_batch(hostile.TINY_RECORD, 2)
    assert targets.fuzz_records(data)[0] == "ok"  # both: "record count 2 is invalid for 7 bytes"
    real = twin._check_record_count

    def reworded(batch, size):
        try:
            real(batch, size)
        except CorruptRecordError as exc:
            raise CorruptRecordError(exc.reason + " (reworded)", exc.offset) from None

    monkeypatch.setattr(twin, "_check_record_count", reworded)
    with pytest.raises(targets.FuzzFailure, match="disagree"):
        targets.fuzz_records(data)
