"""Search fixtures: on-commit indexing inside a test, and the real model where ranking is the point."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tracker.search.embeddings import LocalModelBackend, embedding_backend_set
from tracker.search.store import organization_index_forget

_model: LocalModelBackend | None = None


@pytest.fixture(autouse=True)
def _fresh_search_caches() -> Iterator[None]:
    organization_index_forget()
    yield
    organization_index_forget()
    embedding_backend_set(None)


@pytest.fixture
def real_model() -> LocalModelBackend:
    """all-MiniLM-L6-v2, loaded once for the whole run."""
    global _model  # noqa: PLW0603
    if _model is None:
        _model = LocalModelBackend()
    embedding_backend_set(_model)
    return _model
