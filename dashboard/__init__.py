"""The dashboard's machinery: everything the pages run and draw from, without Streamlit.

Launches (background work, one at a time on the device):

* ``run_manager``    – ``RunManager``: loaded model pairs, the active launch, the latest of each kind;
* ``launch``         – ``Launch``, the one background worker: a thread, a cancel event and a status
                       whose state is ``workloads.drivers.run_state.RunState``;
* ``replay_spec``    – ``ReplaySpec``: what a Start on the Live run or Sweep page asks for;
* ``replay_launch``  – comparisons and sweeps, run by the launch itself (``run_sweep``); its ``ReplayView``
                       holds one ``RunSnapshot`` per run, pulled by the page;
* ``inspect_launch`` – one prompt through one engine (Inspect page).

What the pages draw (the figures and colours are ``presentation``'s):

* ``tables``     – the views as DataFrames, through ``metrics``;
* ``comparison`` – every run against AR ("× AR") and the tables as shown: human headers, units, "—";
* ``token_view`` – the Inspect page's output painted token by token.

And: ``settings`` (where runs go, what every widget starts at), ``uploads``
(uploaded dataset files, stored and checked by the ``--dataset`` reader),
``bench_dirs`` (bench directories and their goals, HTML reports for the Runs
page). The pages are in ``pages/``;
the Streamlit pieces they share in ``widgets/``.
"""
