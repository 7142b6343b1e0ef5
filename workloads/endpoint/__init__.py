"""The endpoint client: an OpenAI-compatible server driven as if it were an engine.

* ``spec``   – ``EndpointSpec``: where the server is, what its rows are called, how prompts are sent;
* ``probe``  – which prompt form a server takes (token ids, text, chat), asked once per run;
* ``stream`` – one streamed request, its tokens timed as they arrive;
* ``engine`` – ``EndpointEngine``: the engine protocol over HTTP, with the server's own metrics.
"""
