"""A fake of llama.cpp's server where the replay meets it: text prompts only, no usage, ``min_tokens``.

``/v1/completions`` refuses a prompt of token ids with a 422 (as llama-cpp-python's
pydantic model does), streams one chunk of text per token with no ``usage`` at
all, has no ``ignore_eos`` but honours ``min_tokens``, and ends with a finish
reason; ``/v1/chat/completions`` streams the same as deltas. Every body it gets
is appended to ``bodies``.
"""

from __future__ import annotations

import json

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

NATURAL_TOKENS = 3  # its answer's length when nothing holds its end of sequence off


def text_only_server(bodies: list[dict]) -> FastAPI:
    app = FastAPI()

    def stream(body: dict, chunk) -> StreamingResponse:
        held = body.get("min_tokens", 0) >= body["max_tokens"]
        n = body["max_tokens"] if held else min(NATURAL_TOKENS, body["max_tokens"])
        reason = "length" if n == body["max_tokens"] else "stop"
        events = [chunk("a", None) for _ in range(n)] + [chunk("", reason)]
        lines = [f"data: {json.dumps(e)}\n\n" for e in events] + ["data: [DONE]\n\n"]
        return StreamingResponse(iter(lines), media_type="text/event-stream")

    @app.get("/v1/models")
    def models():
        return {"object": "list", "data": [{"id": "smollm2", "object": "model"}]}

    @app.post("/v1/completions")
    async def completions(request: Request):
        body = await request.json()
        bodies.append(body)
        if not isinstance(body.get("prompt"), str):
            return JSONResponse({"detail": [{"loc": ["body", "prompt"], "msg": "Input should be a valid string"}]},
                                status_code=422)  # fmt: skip
        if not body.get("stream"):
            return {"choices": [{"index": 0, "text": "a", "finish_reason": "length"}]}
        return stream(body, lambda text, reason: {"choices": [{"index": 0, "text": text, "finish_reason": reason}]})

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        bodies.append(body)
        if not body.get("stream"):
            return {"choices": [{"index": 0, "message": {"role": "assistant", "content": "a"}}]}
        delta = lambda text, reason: {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": reason}]}  # noqa: E731
        return stream(body, delta)

    return app
