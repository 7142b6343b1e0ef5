"""``python -m engine serve``: one engine behind an OpenAI-compatible HTTP API.

    HTTP request --protocol--> prompt ids + SamplingParams --Generation--> engine.submit(Request)
    engine lanes --on_event--> asyncio queue --text--> text pieces --responses / streaming--> JSON or SSE

One ``Request`` per HTTP request, as in-process: the engine's lanes call its
``on_event`` from their threads; ``generation`` hands each event to the event
loop (``call_soon_threadsafe``), turns its tokens into text (held back while a
character or a stop string is incomplete) and cancels the request in the
engine when the client goes away or a stop string ends it. The Prometheus
series (``metrics``) follow the same records under vLLM's names.

Modules: ``protocol`` (the request bodies and their checks), ``responses``
(the bodies sent back), ``prompts`` (messages and prompts to token ids),
``text`` (token ids to text, stop strings), ``generation`` (the engine-thread /
event-loop bridge), ``streaming`` (server-sent events), ``metrics``,
``errors`` (OpenAI-style error bodies), ``auth`` (the API key), ``app`` (the
routes) and ``server`` (model loading, uvicorn).

It does not know how requests are scheduled (that is the engine's), nor what
a workload is: no module here imports ``workloads`` or ``metrics``.
"""
