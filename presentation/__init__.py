"""Presentation: every Plotly figure and colour, shared by the dashboard and the HTML reports.

* ``palette``        – engine and token-kind colours and names, defined once;
* ``figures``        – the dashboard's pure figure builders (DataFrame -> Figure), each module listed there;
* ``report_figures`` – the figures of the shareable HTML report of run directories;
* ``bench_figures``  – the figures of ``python -m workloads bench``.

Figures take numbers already computed by ``metrics`` (frames in its schema's
columns) and compute nothing themselves; nothing here imports torch or
Streamlit.
"""
