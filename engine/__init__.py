"""PD-Verify engines: speculative decoding with three scheduling architectures.

Data flows one way: ``workloads`` builds requests, an engine from this package
runs them, ``metrics`` reads the finished ``Request`` records.
"""

import os

# Lanes are Python threads that issue small torch ops; with OpenMP's default
# active wait, idle worker threads spin on the 2 cores those lanes need and a
# step can take 50-100x longer. Passive waiting must be chosen before torch
# (and its OpenMP runtime) is loaded, hence here. An explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
