"""One definition of pairing (issue 39): requests meet their responses in kproto/arrow/exchanges.py alone.

Pairing was written three times (``kproto.arrow.exchanges.pair``, the Spark worker's
``frame_heads`` / ``pair_heads`` / ``build_exchanges``, ``dump.OpenRequests``), its
ordering and pair-status rules twice, and the exchanges schema had two types for
``pair_status``. Each rule below has a fingerprint, a line shape only its definition
has; the test reads every hand-written module of kproto/ (the Spark package included)
and fails when a fingerprint turns up outside kproto/arrow/exchanges.py. The callers' old
names are checked to be the module's. docs/architecture.md ("Where each rule lives")
names the module.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pa = pytest.importorskip("pyarrow")

ROOT = Path(__file__).resolve().parents[2]
HOME = "kproto/arrow/exchanges.py"
GENERATED = {"kproto/schema/_messages.py", "kproto/messages.pyi"}

#: rule -> fingerprint (a regex over whole files, multiline)
RULES = {
    "pairing: the n-th request with the n-th response per (capture, connection, correlation id)": r'join_type="full outer"',
    "order of exchanges: requests in order, then responses without a request": r"np\.lexsort\(\s*\(\s*np\.where\(has_resp",
    "pair status: unpaired request / response, no response expected": r"PairStatus\.(UNPAIRED_REQUEST|UNPAIRED_RESPONSE|NO_RESPONSE_EXPECTED)\b",
    "a Produce with acks=0 expects no response": r"\.acks == 0\b",
    "open requests carried from one batch to the next": r"^class OpenRequests\b|np\.concatenate\(\[self\.(connection|correlation_id)\b",
    "the exchanges schema: pair_status and its type": r"""["']pair_status["'],\s*pa\.""",
    "status numbers to their names": r"sorted\(enum_type, key=int\)",
    "a topic named by its ID: the names responses give it": r"^def resolve_topic_ids\(",
}

#: What each fingerprint matched before the module existed (git history), so none is vacuous.
OLD_COPIES = {
    "pairing: the n-th request with the n-th response per (capture, connection, correlation id)": '    joined = left.join(right, ["k0", "k1", "k2", "k3"], join_type="full outer")\n',
    "order of exchanges: requests in order, then responses without a request": "    order = np.lexsort((np.where(has_resp, resp, n), np.where(has_req, req, n), h.connection[owner_row],\n",
    "pair status: unpaired request / response, no response expected": "    pair_status[~has_req] = kb.PairStatus.UNPAIRED_RESPONSE\n",
    "a Produce with acks=0 expects no response": '        return cast("ProduceRequest", api.decode_request(payload).body).acks == 0\n',
    "open requests carried from one batch to the next": "        all_corr = np.concatenate([self.correlation_id, corr])\n",
    "the exchanges schema: pair_status and its type": '        pa.field("pair_status", pa.uint8(), False),\n',
    "status numbers to their names": "    names = [member.name for member in sorted(enum_type, key=int)]\n",
    "a topic named by its ID: the names responses give it": "def resolve_topic_ids(rows: Iterable[dict]) -> tuple[dict[str, str], dict[str, str]]:\n",
}


def sources() -> dict[str, str]:
    found = {}
    for pattern in ("*.py", "*.pyx", "*.pxi", "*.pxd"):
        for path in (ROOT / "kproto").rglob(pattern):
            name = path.relative_to(ROOT).as_posix()
            if name not in GENERATED:
                found[name] = path.read_text(encoding="utf-8")
    return found


@pytest.mark.parametrize("rule", sorted(RULES))
def test_pairing_rule_is_written_in_the_exchanges_module_only(rule):
    regex = re.compile(RULES[rule], re.MULTILINE)
    found = {name for name, text in sources().items() if regex.search(text)}
    assert found - {HOME} == set(), f"{rule}: written again in {sorted(found - {HOME})}"
    assert found == {HOME}, f"{rule}: the fingerprint no longer matches {HOME}; update it"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_an_old_copy_would_be_found(rule):
    assert re.search(RULES[rule], OLD_COPIES[rule], re.MULTILINE), rule


def test_the_callers_old_names_are_the_modules():
    import kproto.arrow.frames as kb
    from kproto.analyze import dump
    from kproto.analyze.spark import combine, worker
    from kproto.arrow import exchanges as E

    assert dump.OpenRequests is E.OpenRequests and dump.MAX_OPEN_REQUESTS == E.MAX_OPEN_REQUESTS
    assert combine.resolve_topic_ids is E.resolve_topic_ids
    assert worker.EXCHANGES_SCHEMA.equals(E.exchanges_schema())
    assert E.pair_schema("json").equals(E.pair_schema("json"))
    assert kb.PairStatus is E.PairStatus


def test_one_schema_one_type_per_column():
    from kproto.arrow import exchanges as E

    fields = {f.name: f for f in E.EXCHANGE_FIELDS}
    assert len(fields) == len(E.EXCHANGE_FIELDS)
    for schema in (E.exchanges_schema(), E.pair_schema(), E.pair_schema("json")):
        for field in schema:
            assert field.equals(fields[field.name]), field.name
    assert fields["pair_status"].type == pa.int16()
