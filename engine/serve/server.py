"""Load the models, measure the step costs (once per machine), build the engine and app, serve them with uvicorn.

The address is checked (``engine.serve.address``) by ``python -m engine serve``
before any of this, so a bad port or host costs no model loading.

Binds to 127.0.0.1 unless told otherwise. Once the socket listens, prints one
line with the URL (with the port the system chose, for ``--port 0``);
everything else goes to the log (warnings and errors only). Ctrl-C or SIGTERM
shuts down gracefully: the app's shutdown stops the engine, which cancels
what is still running.
"""

from __future__ import annotations

import argparse
import asyncio

import uvicorn

from engine.flags import engine_config_from_args
from engine.models.pair import ModelPair, load_model_pair
from engine.profiling.prepare import prepare_profile
from engine.schedulers.registry import make_engine
from engine.serve.app import build_app
from engine.terminal_progress import progress_bar

READY_POLL_S = 0.05
# on Ctrl-C, streams still open after this are cut: the engine then stops and cancels their requests
GRACEFUL_SHUTDOWN_S = 5.0


def served_name(args: argparse.Namespace, pair: ModelPair) -> str:
    """``--served-model-name``, else the preset's name, else the verifier as given."""
    return args.served_model_name or pair.source.get("preset") or args.verifier_model


def serve(args: argparse.Namespace) -> None:
    config = engine_config_from_args(args)
    pair = load_model_pair(args.preset, args.draft_model, args.verifier_model, args.device, args.dtype)
    name = served_name(args, pair)
    with progress_bar() as progress:
        profile = prepare_profile(pair, config, progress, engine=args.engine)
    engine = make_engine(args.engine, pair, config, profile)
    app = build_app(engine, pair, name, api_key=args.api_key, max_waiting=args.max_waiting)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S
    )
    server = uvicorn.Server(config)
    try:
        asyncio.run(_serve(server, f"{args.engine} engine, model {name!r}"))
    except KeyboardInterrupt:  # uvicorn has shut down gracefully, then re-raised the signal (as uvicorn.run does)
        pass


async def _serve(server: uvicorn.Server, what: str) -> None:
    task = asyncio.create_task(server.serve())
    while not server.started and not task.done():
        await asyncio.sleep(READY_POLL_S)
    if server.started:
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        host = f"[{host}]" if ":" in host else host
        print(f"PD-Verify serving the {what} at http://{host}:{port}/v1", flush=True)
    await task
