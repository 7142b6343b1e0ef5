"""The dashboard's machinery: everything the pages run and draw from, without Streamlit.

Launches (background work, one at a time on the device):

* ``run_manager``    – ``RunManager``: loaded model pairs, the active launch, the latest of each kind;
* ``launch``         – the ``Launch`` worker thread and its ``LaunchState``;
* ``replay_spec``    – ``ReplaySpec``: what a Start on the Live run or Sweep page asks for;
* ``replay_launch``  – comparisons and sweeps, run by ``workloads.drivers.job.ReplayJob``;
* ``replay_view``    – ``ReplayView``/``RunView``: where every run stands, from the workloads harness;
* ``inspect_launch`` – one prompt through one engine (Inspect page).

What the pages draw:

* ``tables``     – the views as DataFrames, through ``metrics``;
* ``comparison`` – every run against AR ("× AR") and the tables as shown: human headers, units, "—";
* ``figures``    – pure Plotly builders (DataFrame -> Figure);
* ``palette``    – engine and token-kind colours and names, defined once;
* ``token_view`` – the Inspect page's output painted token by token.

And: ``settings`` (where runs go, what every widget starts at), ``uploads``
(uploaded dataset files, stored and checked by the ``--dataset`` reader),
``bench_dirs`` (bench directories and their goals, HTML reports for the Runs
page). The pages are in ``pages/``;
the Streamlit pieces they share in ``widgets/``.
"""
