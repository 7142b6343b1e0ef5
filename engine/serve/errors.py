"""OpenAI-style errors: ``{"error": {"message", "type", "param", "code"}}`` with a fitting status.

400: a request this server cannot serve as sent (malformed JSON, wrong types
and missing fields included, as vLLM answers them; an empty or over-long
prompt; a value the engine refuses; a feature it lacks). 401: a missing or
wrong API key. 404: an unknown model or path. 413: a body over the size
limit. 429: too many requests already waiting. 503: the engine is not
running (crashed or stopping). 500: a request the engine failed alone.
"""

from __future__ import annotations

import json
from http import HTTPStatus

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    405: "invalid_request_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "server_error",
}


class APIError(Exception):
    """An error answered to the client as is."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code

    def body(self) -> dict:
        kind = ERROR_TYPES.get(self.status, "invalid_request_error" if self.status < 500 else "server_error")
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}

    def response(self) -> Response:
        # ASCII JSON: a message quoting the client's text (a lone surrogate, say) still encodes
        content = json.dumps(self.body(), ensure_ascii=True, separators=(",", ":"))
        return Response(content, status_code=self.status, media_type="application/json")


def validation_error(exc: RequestValidationError) -> APIError:
    """One 400 naming every field pydantic refused (or saying the body is not JSON)."""
    problems, params = [], []
    for err in exc.errors():
        loc = [str(part) for part in err.get("loc", ()) if part != "body"]
        if err.get("type") == "json_invalid":
            problems.append(f"the body is not valid JSON: {err.get('ctx', {}).get('error', err.get('msg'))}")
            continue
        where = ".".join(loc)
        params.append(where)
        problems.append(f"{where}: {err.get('msg')}" if where else str(err.get("msg")))
    return APIError(400, "; ".join(problems) or "invalid request", param=params[0] if params else None)


def install_error_handlers(app: FastAPI) -> None:
    """Every error the app answers, in one shape."""

    @app.exception_handler(APIError)
    async def api_error(_: Request, exc: APIError) -> Response:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> Response:
        return validation_error(exc).response()

    @app.exception_handler(HTTPException)
    async def http_error(_: Request, exc: HTTPException) -> Response:
        message = exc.detail if isinstance(exc.detail, str) else HTTPStatus(exc.status_code).phrase
        return APIError(exc.status_code, message).response()
