"""What JSON columns store of what the model wrote (tracker/inputs.py)."""

from __future__ import annotations

import json

from tracker.inputs import NulFreeJSONEncoder


def encoded(value: object) -> object:
    return json.loads(json.dumps(value, cls=NulFreeJSONEncoder))


def test_a_nul_anywhere_is_stored_as_the_replacement_character():
    value = {"items": [{"title": "a\x00b"}, "ok"], "k\x00ey": ["\x00"]}
    assert encoded(value) == {"items": [{"title": "a\ufffdb"}, "ok"], "k\ufffdey": ["\ufffd"]}


def test_text_that_only_reads_like_an_escaped_nul_is_kept():
    value = {"code": "printf('\\u0000')", "n": 3}
    assert encoded(value) == value


def test_json_without_a_nul_is_encoded_as_json_encodes_it():
    value = {"tickets": [{"key": f"BAL-{n}", "title": "Ünïcode ✓", "version": n} for n in range(20)]}
    assert json.dumps(value, cls=NulFreeJSONEncoder) == json.dumps(value)
