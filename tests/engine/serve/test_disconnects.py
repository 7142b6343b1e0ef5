"""64 streaming clients through the server, half of them leaving mid-stream: nothing leaks, nobody else is disturbed."""

import asyncio
import json
import random

import httpx

from engine.config import ControllerConfig
from engine.faults import Fault, FaultInjector
from engine.request import RequestStatus
from engine.serve.prompts import completion_prompt_ids
from tests.support.serve import served, uvicorn_thread, wait_until

CLIENTS = 64
MAX_TOKENS = 32


def _body(i: int) -> dict:
    words = ["river", "stone", "light", "cloud", "seed", "wind", "salt", "iron"]
    prompt = " ".join(words[(i * 7 + k) % len(words)] for k in range(2 + i % 5))
    return {"prompt": f"{i}: {prompt}", "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, "stream": True}


async def _client(http: httpx.AsyncClient, i: int, leave_after: int | None) -> str | None:
    """The streamed text, or None for a client that left after ``leave_after`` chunks."""
    text, chunks = [], 0
    async with http.stream("POST", "/v1/completions", json=_body(i)) as response:
        assert response.status_code == 200
        async for line in response.aiter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line.removeprefix("data: "))
            assert "error" not in event, event
            text.append(event["choices"][0]["text"])
            chunks += 1
            if leave_after is not None and chunks >= leave_after:
                return None  # leaving the block closes the connection mid-stream
    return "".join(text)


async def _run_clients(url: str, leave: dict[int, int]) -> list[str | None]:
    limits = httpx.Limits(max_connections=CLIENTS)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        return await asyncio.gather(*(_client(http, i, leave.get(i)) for i in range(CLIENTS)))


def _last_step_waits_for_cancel(verify, leaving: set[tuple[int, ...]]):
    """``engine._verify``, holding a block that would end a leaver's request until that request is cancelled."""

    def run(block):
        for seq in block.seqs:
            if tuple(seq.request.prompt_token_ids) in leaving and seq.remaining <= max(block.lens) + 1:
                assert wait_until(lambda seq=seq: seq.request.status.finished, timeout=60), "its client never left"
        return verify(block)

    return run


def test_half_of_64_streaming_clients_leave_their_requests_are_cancelled_and_the_rest_match(tiny_pair):
    injector = FaultInjector(tiny_pair)
    server = served(injector.pair, "pdv", controller=ControllerConfig(kind="fixed"), drafter="model")
    engine = server.engine
    rng = random.Random(20)
    leavers = {i: rng.randint(1, 3) for i in rng.sample(range(CLIENTS), CLIENTS // 2)}
    with uvicorn_thread(server.app) as url:
        undisturbed = asyncio.run(_run_clients(url, {}))
        reference = {tuple(r.prompt_token_ids): r for r in server.submitted}
        server.submitted.clear()
        # slower verify steps, so that leavers leave while their requests generate; and a leaver's last step
        # waits for its client to be gone, so that no request of a leaver can finish first
        leaving = {tuple(completion_prompt_ids(tiny_pair.tokenizer, _body(i)["prompt"])) for i in leavers}
        engine._verify = _last_step_waits_for_cancel(engine._verify, leaving)
        with injector.inject(Fault("verify", "stall", times=None, seconds=0.02)):
            disturbed = asyncio.run(_run_clients(url, leavers))
        assert wait_until(lambda: engine.budget.used == 0 and engine.stats().unfinished == 0), (
            f"{engine.budget.used} KV tokens still held"
        )
        health = httpx.get(f"{url}/health").status_code
    assert len(reference) == CLIENTS and all(r.status == RequestStatus.OK for r in reference.values())
    by_prompt = {tuple(r.prompt_token_ids): r for r in server.submitted}
    for i, text in enumerate(disturbed):
        prompt_ids = tuple(completion_prompt_ids(tiny_pair.tokenizer, _body(i)["prompt"]))
        request = by_prompt[prompt_ids]
        if i in leavers:
            assert text is None
            assert request.status == RequestStatus.CANCELLED and request.error == "the client went away", i
            assert request.num_output_tokens < MAX_TOKENS
        else:
            assert request.status == RequestStatus.OK and text == undisturbed[i], i
            assert request.output_token_ids == reference[prompt_ids].output_token_ids, i
    assert health == 200 and engine.stats().accounting_problem() is None
