"""Pure Plotly figure builders: a DataFrame in, a ``go.Figure`` out, nothing else touched.

Every chart of the dashboard is built here, so every chart colours an engine
the same way (``presentation.palette``) and the builders can be tested on
hand-made frames. A builder draws one trace per value of its ``group`` column
(by default ``engine``; the Runs page groups by run ``label``) and takes that
trace's colour from the group's engine. Column names are those of
``metrics.schema`` (timeseries, requests, summary).

* ``base``          – size, titles, legend placement, the empty state, grouping;
* ``over_time``     – throughput, draft length, acceptance, queues, device use against time;
* ``across_runs``   – latency histograms and CDFs, metrics and speed-up over AR against load, summary bars,
                      acceptance by draft position;
* ``request_steps`` – one request's drafted and accepted tokens per verify step;
* ``small_samples`` – a few requests per engine: latencies as points beside a box, acceptance as a running rate.
"""

from presentation.figures.across_runs import (
    acceptance_by_position,
    cdf_lines,
    latency_histogram,
    metric_vs_load,
    speedup_vs_load,
    summary_bars,
)
from presentation.figures.over_time import (
    acceptance_over_time,
    device_utilisation,
    draft_length_over_time,
    line_over_time,
    queue_depths,
    throughput_over_time,
)
from presentation.figures.request_steps import step_bars
from presentation.figures.small_samples import acceptance_so_far, latency_points

__all__ = [
    "acceptance_by_position",
    "acceptance_so_far",
    "acceptance_over_time",
    "cdf_lines",
    "device_utilisation",
    "draft_length_over_time",
    "latency_histogram",
    "latency_points",
    "line_over_time",
    "metric_vs_load",
    "queue_depths",
    "speedup_vs_load",
    "step_bars",
    "summary_bars",
    "throughput_over_time",
]
