"""Draft-length controllers, shared by every speculative engine.

* ``fixed``    – L never changes.
* ``feedback`` – acceptance-aware feedback on the acceptance rate, the verify
  queue and the decode p95 (``feedback``).
* ``goodput``  – the L that maximises expected tokens per second, from costs
  measured online (``goodput``).
* ``cost``     – per step and per source of proposals, the L that maximises
  expected tokens per second, from the machine's measured cost profile
  (``cost``; the profile itself is measured by ``engine.profiling``).

``base`` holds the interface and the values that pass between an engine and
its controller; ``registry`` builds one by name. The latest 1,000 changes of L
are kept with their reasons in the controller's ``changes`` log.
"""
