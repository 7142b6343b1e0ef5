"""The lanes' OpenMP pool release on the tiny pair, where turns last about a millisecond.

Baseline, PD and PDV (pipelined, n-gram drafts, fixed L) each generate 64
requests of up to 64 tokens at once, in three rounds with the order of the
modes rotating; tokens/s per mode:

* ``waiting`` – as the engines do: a lane releases its workers at the end of a
  turn another lane waits for, and on idle passes;
* ``every turn`` – at the end of every turn;
* ``off`` – never (``release_openmp_pool`` replaced by a no-op in the lanes).

Run from the checkout: ``PYTHONPATH=. python docs/data/openmp/pool_release_tiny.py``.
"""

import statistics
import time

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.models.pair import load_model_pair
from engine.request import Request
from engine.schedulers import lanes
from engine.schedulers.registry import make_engine

MODES = ("waiting", "every turn", "off")


def main() -> None:
    pair = load_model_pair("tiny", device="cpu")
    release, waiting = lanes.release_openmp_pool, lanes.LaneArbiter.others_waiting
    rates: dict[tuple[str, str], list[float]] = {}
    try:
        for r in range(3):
            for mode in MODES[r:] + MODES[:r]:
                lanes.release_openmp_pool = release if mode != "off" else (lambda: False)
                lanes.LaneArbiter.others_waiting = waiting if mode == "waiting" else (lambda self: True)
                for name in ("baseline", "pd", "pdv"):
                    config = EngineConfig(
                        drafter="ngram", controller=ControllerConfig(kind="fixed"), hybrid_threshold=None
                    )
                    eng = make_engine(name, pair, config)
                    params = SamplingParams(max_new_tokens=64, stop_token_ids=(0,))
                    requests = [Request(f"r{i}", [1, 2, 3 + i % 50], params) for i in range(64)]
                    start = time.perf_counter()
                    eng.generate(requests, timeout=300)
                    seconds = time.perf_counter() - start
                    eng.stop()
                    rates.setdefault((name, mode), []).append(sum(q.num_output_tokens for q in requests) / seconds)
    finally:
        lanes.release_openmp_pool, lanes.LaneArbiter.others_waiting = release, waiting
    print("engine,mode,tok_s_rounds,tok_s_median")
    for (name, mode), values in sorted(rates.items()):
        print(f"{name},{mode},{' '.join(str(round(v)) for v in values)},{round(statistics.median(values))}")


if __name__ == "__main__":
    main()
