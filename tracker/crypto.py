"""Encryption of stored secrets (a project's LLM credential) with a key derived from SECRET_KEY."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    digest = hashlib.sha256(f"ballet-credential:{settings.SECRET_KEY}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str | None:
    """The plaintext, or None if the token was made with another SECRET_KEY."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return None
