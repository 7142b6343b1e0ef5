"""The endpoint client: an OpenAI-compatible server driven as if it were an engine.

* ``spec``   – ``EndpointSpec``: where the server is and what its rows are called;
* ``stream`` – one streamed request, its tokens timed as they arrive;
* ``engine`` – ``EndpointEngine``: the engine protocol over HTTP, with the server's own metrics.
"""
