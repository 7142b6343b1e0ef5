"""PD-Verify engines: speculative decoding with three scheduling architectures.

Data flows one way: ``workloads`` builds requests, an engine from this package
runs them, ``metrics`` reads the finished ``Request`` records.
"""

# OpenMP's wait policy is left to the runtime: libgomp's default (a worker spins
# for a while between parallel regions, then sleeps) made the smol verifier's
# step 8-10 % faster than passive waiting, which this package set before
# (docs/results.md#openmp-workers-between-parallel-regions). What keeps lane
# threads from starving is fewer idle workers, not sleeping ones: see
# engine.profiling.lane_threads.release_openmp_pool. Do not set
# OMP_WAIT_POLICY=ACTIVE: workers would then spin for good on the cores the
# lanes need.
