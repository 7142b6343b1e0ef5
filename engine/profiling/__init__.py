"""Measuring what a step costs on this machine: a named, once-per-machine step before an engine starts.

The ``cost`` controller chooses draft lengths from the verifier's and the
draft's forward times (``cost_profile.CostProfile``). Measuring them takes a
few seconds on the tiny pair and a minute or more on a real one, so it is its
own step, never a side effect of building an engine:

* ``prepare.prepare_profile`` (or ``prepare_profiles`` for several engine
  configs) reads the cached profile or measures it once, reporting progress
  through a ``ProgressFn``; ``python -m engine generate | serve | profile``,
  ``python -m workloads replay`` and the dashboard's launches run it first and
  show its progress;
* ``Engine`` takes the profile it is handed, or reads the cached one, and
  raises ``ProfileMissing`` (naming ``python -m engine profile``) when there is
  none: it never measures.

``measure`` holds the timing itself, ``store`` the cache
(``$PDV_PROFILE_DIR``, by default ``profiles/`` under the cache root).
The profile also says how much two lanes running at once slow each other
(``interference``, read through ``CostProfile.concurrent_slowdown``), timed
with ``concurrency``'s lanes, each on its own intra-op thread budget
(``lane_threads``, which says how torch's thread count behaves per thread).
"""

from engine.profiling.cost_profile import CostProfile, ProfileMissing, ProfileShape
from engine.profiling.interference import Interference
from engine.profiling.prepare import (
    needs_profile,
    prepare_default_profiles,
    prepare_profile,
    prepare_profiles,
    profile_shape,
)

__all__ = [
    "CostProfile",
    "Interference",
    "ProfileMissing",
    "ProfileShape",
    "needs_profile",
    "prepare_default_profiles",
    "prepare_profile",
    "prepare_profiles",
    "profile_shape",
]
