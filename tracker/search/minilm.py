"""all-MiniLM-L6-v2 on onnxruntime, from the safetensors weights: no torch, no transformers.

The model's sentence-transformers pipeline (BERT, mean pooling over the
tokens, L2 normalization) with the BERT encoder as an ONNX graph built at
load time (:mod:`tracker.search.onnx_bert`). The weights are not copied into
the graph: onnxruntime reads them from the memory-mapped ``model.safetensors``
once, packing each matrix into its own layout, and the file's pages are then
let go; the word-embedding rows a text uses are read from the file at each
call (a few microseconds), so the 45 MB table never sits in the process. The
computation is BERT's in float32 (exact erf GELU, LayerNorm eps 1e-12): the
vectors are those of the torch implementation to about 1e-6.

A batch is packed, not padded: the texts' tokens are stacked in one matrix of
at most ``TOKEN_BUDGET`` rows, the dense layers run once over all of them,
and an additive block-diagonal mask keeps each text's attention within its
own tokens (a masked score weighs exactly zero, as padding's does).
"""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

Vectors = npt.NDArray[np.float32]
Ids = npt.NDArray[np.int64]
MAX_TOKENS = 256  # the model's max_seq_length: longer texts are truncated
TOKEN_BUDGET = 256  # rows of one packed run: attention's cost stays small next to the dense layers'
_MASKED = np.finfo(np.float32).min


class SafeTensors:
    """The float32 tensors of a safetensors file: views of its read-only mapping, or rows read on demand."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("rb")
        self._buffer = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ)
        size = int.from_bytes(self._buffer[:8], "little")
        header = json.loads(self._buffer[8 : 8 + size])
        self._start = 8 + size
        self._entries = {n: e for n, e in header.items() if n != "__metadata__" and e["dtype"] == "F32"}

    def names(self) -> list[str]:
        return list(self._entries)

    def release(self) -> None:
        """Drop the mapped pages from this process (a view read afterwards reads them again)."""
        self._buffer.madvise(mmap.MADV_DONTNEED)

    def view(self, name: str) -> Vectors:
        """The tensor as a view of the mapping: no copy, its pages read when touched."""
        entry = self._entries[name]
        start, end = entry["data_offsets"]
        array = np.frombuffer(self._buffer, dtype="<f4", count=(end - start) // 4, offset=self._start + start)
        return array.reshape(entry["shape"])

    def rows(self, name: str, indexes: Ids) -> Vectors:
        """Rows of a 2-d tensor read from the file (through the page cache, never mapped here)."""
        entry = self._entries[name]
        width = entry["shape"][1] * 4
        offset = self._start + entry["data_offsets"][0]
        data = b"".join(os.pread(self._file.fileno(), width, offset + int(i) * width) for i in indexes)
        return np.frombuffer(data, dtype="<f4").reshape(len(indexes), entry["shape"][1])


class MiniLM:
    """The model of one directory (``config.json``, ``model.safetensors``, ``tokenizer.json``)."""

    def __init__(self, directory: Path, *, threads: int = 1) -> None:
        from tokenizers import Tokenizer  # noqa: PLC0415 - loaded with the model, on first use

        from tracker.search.onnx_bert import bert_encoder  # noqa: PLC0415 - onnxruntime loads on first use

        config = json.loads((directory / "config.json").read_text())
        self._tensors = SafeTensors(directory / "model.safetensors")
        # Matrices as views of the file (the session packs its own copy); vectors copied (read at each run).
        weights = {name: self._tensors.view(name) for name in self._tensors.names()}
        weights = {name: view if view.ndim == 2 else view.copy() for name, view in weights.items()}
        self._encoder = bert_encoder(weights, config, threads=threads)
        self._positions = weights["embeddings.position_embeddings.weight"].copy()
        self._token_type = weights["embeddings.token_type_embeddings.weight"][0].copy()
        self._tensors.release()  # the session has packed the matrices; the vectors were copied
        self._tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
        self._tokenizer.enable_truncation(
            max_length=MAX_TOKENS
        )  # the file says 128 and pads: not the model's
        self._tokenizer.no_padding()
        self.dimensions = int(config["hidden_size"])

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One L2-normalized vector per text."""
        sequences = [np.asarray(self._tokenizer.encode(text).ids, dtype=np.int64) for text in texts]
        pooled = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for chunk in _packs([len(ids) for ids in sequences]):
            pooled[chunk] = self._mean_hidden([sequences[i] for i in chunk])
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _mean_hidden(self, sequences: list[Ids]) -> Vectors:
        """The mean of the last hidden states of each sequence, run as one packed matrix."""
        lengths = np.array([len(ids) for ids in sequences])
        positions = np.concatenate([np.arange(n) for n in lengths])
        words = self._tensors.rows("embeddings.word_embeddings.weight", np.concatenate(sequences))
        embedded = words + self._positions[positions] + self._token_type
        owner = np.repeat(np.arange(len(sequences)), lengths)
        mask = np.where(owner[:, None] == owner[None, :], np.float32(0), _MASKED).astype(np.float32)
        hidden = self._encoder.run(embedded, mask)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return (np.add.reduceat(hidden, starts, axis=0) / lengths[:, None]).astype(np.float32)


def _packs(lengths: list[int]) -> list[list[int]]:
    """Indexes of consecutive sequences whose lengths add up to at most ``TOKEN_BUDGET``."""
    packs: list[list[int]] = []
    used = TOKEN_BUDGET
    for index, length in enumerate(lengths):
        if used + length > TOKEN_BUDGET:
            packs.append([])
            used = 0
        packs[-1].append(index)
        used += length
    return packs
