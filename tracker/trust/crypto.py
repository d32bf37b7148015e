"""Encryption of stored secrets (a project's LLM credential) with the credential key.

The key is ``BALLET_CREDENTIAL_KEY``, apart from Django's ``SECRET_KEY`` (docs/trust.md#secrets): a copy
of the database decrypts nothing without it. Keys in ``BALLET_CREDENTIAL_KEY_FALLBACKS`` still
decrypt, so the key can be rotated; new writes always use the current key.
"""

from __future__ import annotations

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings


def _fernet() -> MultiFernet:
    return MultiFernet([Fernet(key) for key in settings.BALLET_CREDENTIAL_KEYS])


def encrypt(plaintext: str) -> str:
    return _fernet().encrypt(plaintext.encode()).decode()


def decrypt(token: str) -> str | None:
    """The plaintext, or None if no current or fallback key decrypts the token."""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except InvalidToken:
        return None
