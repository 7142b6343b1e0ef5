"""Limits that protect the engine from what one client sends: the body size, and how many requests may wait.

``BodyLimitMiddleware`` reads a request's body before anything parses it and
answers 413 once it passes ``max_bytes`` (a declared ``Content-Length`` is
refused before a byte is read), so a huge body is never tokenized. The body
it read is replayed to the app, and later reads go to the client again, so
disconnect detection keeps working.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from engine.serve.errors import APIError

# A prompt filling a 32,768-token context is about 250 KB of JSON (as text or as token ids); a body
# sixteen times that is a mistake or an attack, and is refused before it is parsed or tokenized.
MAX_BODY_BYTES = 4 * 1024 * 1024


def too_large(max_bytes: int) -> APIError:
    return APIError(413, f"the request body is larger than {max_bytes} bytes", code="request_too_large")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        declared = next((value for name, value in scope["headers"] if name == b"content-length"), None)
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await too_large(self.max_bytes).response()(scope, receive, send)
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return  # the client left before sending its body: nothing to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await too_large(self.max_bytes).response()(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body: Message | None = {"type": "http.request", "body": b"".join(chunks), "more_body": False}

        async def replay() -> Message:
            nonlocal body
            if body is not None:
                message, body = body, None
                return message
            return await receive()

        await self.app(scope, replay, send)
