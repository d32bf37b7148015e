"""A token-authenticated async REST client, as an agent (a token user) calls Ballet."""

from __future__ import annotations

from django.test import AsyncClient
from rest_framework.authtoken.models import Token

from tests.planner.conftest import sync


class TokenClient:
    """An async client that sends a token on every request (AsyncClient drops default headers)."""

    def __init__(self, token: str) -> None:
        self.client = AsyncClient()
        self.headers = {"Authorization": f"Token {token}"}

    async def get(self, path: str):
        return await self.client.get(path, headers=self.headers)

    async def post(self, path: str, data=None, content_type: str = "application/json"):
        return await self.client.post(path, data, content_type=content_type, headers=self.headers)

    async def patch(self, path: str, data=None, content_type: str = "application/json"):
        return await self.client.patch(path, data, content_type=content_type, headers=self.headers)


async def client_for(user) -> TokenClient:
    token, _ = await sync(Token.objects.get_or_create)(user=user)
    return TokenClient(token.key)
