"""The API key: every path under ``/v1`` needs ``Authorization: Bearer KEY``; ``/health`` and ``/metrics``
stay open, as in vLLM, so probes and scrapers need no secret.

A plain ASGI middleware, so it answers before the body is read (a request
without the key gets 401 whatever it sends) and leaves streaming responses
and disconnect detection untouched.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from engine.serve.errors import APIError

PROTECTED_PREFIX = "/v1"


class APIKeyMiddleware:
    def __init__(self, app: ASGIApp, api_key: str) -> None:
        self.app = app
        self._expected = f"Bearer {api_key}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(PROTECTED_PREFIX) and not self._allowed(scope):
            error = APIError(401, "missing or wrong API key: send Authorization: Bearer KEY", code="invalid_api_key")
            await error.response()(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        given = next((value for name, value in scope["headers"] if name == b"authorization"), b"")
        return hmac.compare_digest(given, self._expected)
