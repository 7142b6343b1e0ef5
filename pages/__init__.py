"""The dashboard: one file per page, plus the helpers the pages share.

Pages (registered with ``st.navigation`` in ``app.py``): ``live_run``,
``sweep_run``, ``saved_runs``, ``inspect_request``.

Helpers:

* ``run_manager`` / ``launch`` / ``replay_launch`` / ``inspect_launch`` / ``recording`` –
  everything that runs in the background, and the immutable views the pages draw from;
* ``figures`` – pure Plotly builders (DataFrame -> Figure), one engine colour map;
* ``tables`` – the manager's views as DataFrames, through ``metrics``;
* ``controls`` / ``forms`` – Start/Stop, the status card, the shared settings widgets;
* ``token_view`` / ``uploads`` – the Inspect page's token painting, uploaded datasets;
* ``settings`` – where runs go and what every widget starts at.
"""
