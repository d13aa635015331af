"""Every message class and nested struct carries a docstring made from the schema's facts
(kproto/schema/_docs.py), written on first read, the same text the .pyi stubs carry."""

from __future__ import annotations

import pydoc
import subprocess
import sys

import pytest

from kproto import messages
from kproto.schema import MESSAGES, Message, message_class
from kproto.schema._docs import class_doc, field_facts, version_text


def _classes():
    for name in sorted(MESSAGES):
        top = message_class(name)
        yield name, None, top
        for struct in field_facts(name):
            if struct is not None:
                yield name, struct, getattr(top, struct)


def test_every_class_and_field_documented():
    count = 0
    for name, struct, cls in _classes():
        doc = cls.__doc__
        assert doc and doc != Message.__doc__, (name, struct)
        assert doc.startswith(f"{struct or name}: "), (name, struct, doc[:60])
        for field_name in cls._field_names:
            assert f"\n    {field_name}: Kafka type " in doc, (name, struct, field_name)
        count += 1
    assert count > 189  # every message plus its nested structs


def test_produce_request_facts():
    doc = pydoc.render_doc(messages.ProduceRequest, renderer=pydoc.plaintext)
    assert "the request body of the Produce API (key 0)" in doc
    assert "flexible (compact strings and arrays, tagged fields) in v9-13" in doc
    assert "Definitions: v0-2 from Kafka 3.9.2, v3-13 from Kafka 4.4.0." in doc
    assert "transactional_id: Kafka type string; in v3-13; nullable in v3-13; default None." in doc
    topic = messages.ProduceRequest.TopicProduceData.__doc__
    assert "name: Kafka type string; in v0-12; default ''." in topic
    assert "topic_id: Kafka type uuid; in v13; default the zero UUID." in topic
    leader = messages.ProduceResponse.PartitionProduceResponse.__doc__
    assert "current_leader: Kafka type LeaderIdAndEpoch; in v10-13; tagged field (tag 0) in v10-13" in leader


def test_old_name_and_header():
    assert "former name ListClientMetricsResourcesRequest" in messages.ListConfigResourcesRequest.__doc__
    assert messages.RequestHeader.__doc__.startswith("RequestHeader: the header of every request frame.")


def test_instance_reads_the_class_doc():
    assert messages.MetadataRequest().__doc__ == messages.MetadataRequest.__doc__ == class_doc("MetadataRequest")


@pytest.mark.parametrize(
    "versions, text",
    [
        ((0, 13), "v0-13"),
        ({4}, "v4"),
        ({0, 5, 6, 7}, "v0, v5-7"),
        (set(), "none"),
        (None, "none"),
    ],
)
def test_version_text(versions, text):
    assert version_text(versions) == text


def test_docstrings_cost_nothing_at_import():
    """The text is written on first read: importing kproto or building a class writes none."""
    code = (
        "import sys, kproto, kproto.messages as m; print('kproto.schema._docs' in sys.modules); "
        "print(m.FetchRequest.__dict__['__doc__'].text is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]


def test_api_names_are_the_versions_modules():
    """The docstrings name each API as kproto.versions.api_name does (the schema layer
    cannot import that module, so the two are held together here)."""
    from kproto import versions as kv

    for name, info in MESSAGES.items():
        if info["api_key"] is not None:
            expected = f"the {kv.api_name(info['api_key'])} API (key {info['api_key']})"
            assert expected in message_class(name).__doc__.splitlines()[0], name
