"""A discrete-event simulator of the engines: their own policies on a virtual clock, forwards priced by a cost model.

* ``policies`` – the one module that imports ``engine``: plan functions, controllers, admission, records;
* ``clock`` – the event loop and the ``Clock`` the replay's dispatch waits on;
* ``lanes``, ``works``, ``engine``, ``engines`` – the simulated lanes, their works, the engine interface and
  the four compositions (AR, Baseline, PD, PDV);
* ``cost_model`` (the interface), ``measured_cost`` (a measured profile: this machine's or a GPU's),
  ``roofline`` (a named accelerator) – what a forward costs;
* ``acceptance`` – how many drafted tokens are accepted, from a real run's steps or one stated rate;
* ``model_shapes`` – model pairs by their architectures' shapes, no weights.

Every figure it produces is simulated and is labelled so wherever it is shown (``docs/simulator.md``).
"""
