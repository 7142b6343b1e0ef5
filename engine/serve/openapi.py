"""The server's OpenAPI schema (``/openapi.json``) saying what the routes really answer.

FastAPI documents every route with a body as answering 422 with its own
validation shape, and every other route as answering JSON. This server
answers a refused body with a 400 in OpenAI's error shape (``errors``),
``/health`` with an empty body and ``/metrics`` with Prometheus text. A client
generated from the schema, or a tool that tests the server against it,
would otherwise expect answers the server never gives. ``generation_responses``,
``HEALTH`` and ``METRICS`` are passed to the routes; ``describe`` replaces
FastAPI's schema with one without the 422s.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    """Every error this server answers (``engine.serve.errors.APIError.body``)."""

    error: ErrorDetail


def _error(description: str) -> dict[str, Any]:
    return {"model": ErrorBody, "description": description}


# what a generation route answers besides its answer (engine.serve.errors says when each is sent)
ROUTE_ERRORS: dict[int | str, dict[str, Any]] = {
    400: _error("a request this server cannot serve as sent (malformed JSON, wrong types, refused values)"),
    401: _error("a missing or wrong API key (when the server has one)"),
    404: _error("an unknown model"),
    413: _error("a body over the size limit"),
    429: _error("too many requests already waiting for the engine"),
    500: _error("a request the engine failed alone"),
    503: _error("the engine is not running"),
}


def generation_responses(answer: type[BaseModel]) -> dict[int | str, dict[str, Any]]:
    """A generation route's answers: ``answer`` as JSON, or server-sent events with ``stream``, or an error."""
    # one server-sent event: its data is a chunk of ``answer`` as JSON, or the last one's "[DONE]"
    event = {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}
    streamed = {"text/event-stream": {"schema": event}}
    return {200: {"model": answer, "content": streamed, "description": "the answer"}, **ROUTE_ERRORS}


HEALTH: dict[int | str, dict[str, Any]] = {
    200: {"description": "the engine is running (empty body)", "content": {}},
    503: _error("the engine is not running"),
}
METRICS: dict[int | str, dict[str, Any]] = {
    200: {"description": "Prometheus text exposition", "content": {"text/plain": {"schema": {"type": "string"}}}},
}


def describe(app: FastAPI) -> None:
    """Make ``app.openapi()`` (served at ``/openapi.json``) FastAPI's schema without its 422 answers."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version, routes=app.routes)
            for operations in schema.get("paths", {}).values():
                for operation in operations.values():
                    operation.get("responses", {}).pop("422", None)
            components = schema.get("components", {}).get("schemas", {})
            for name in ("HTTPValidationError", "ValidationError"):
                components.pop(name, None)
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi
