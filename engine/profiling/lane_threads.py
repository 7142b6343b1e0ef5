"""Giving one lane thread its own intra-op thread budget on a CPU.

What ``torch.set_num_threads`` does when two Python threads call it, in
this build (torch 2.13, ATen's OpenMP backend; checked by counting the OS
threads that gain CPU time while one Python thread runs matmuls):

* it sets the *calling* thread's count (OpenMP's per-thread ``nthreads``
  and MKL's thread-local count), and also a process-wide value;
* a Python thread's own count is set lazily from that process-wide value
  the first time the thread enters ATen's parallel machinery
  (``torch.get_num_threads()`` or a parallel loop; a plain ``torch.mm``,
  which goes straight to MKL or oneDNN, does not);
* so a thread that calls ``set_num_threads(1)`` before that first entry
  loses its setting when another thread sets the process-wide value in
  between: its first parallel loop re-initialises it (measured: two OS
  threads worked for a lane that had asked for one);
* a thread that first calls ``torch.get_num_threads()`` and then
  ``set_num_threads(n)`` keeps ``n`` whatever other threads set later; two
  such lanes at one thread each ran with two OS threads working in all,
  while the main thread kept its two.

``use_intra_op_threads`` is that sequence. Its side effect on the
process-wide value (the count a thread that never sets one starts with)
is why ``restore_process_threads`` exists: whoever starts lanes puts the
value back when they end.

OpenMP's worker threads, and how they wait (libgomp, the runtime of ATen's
OpenMP backend on Linux): every thread that opens a parallel region has its
own pool of workers. Between regions a worker spins (300,000 times unless
``GOMP_SPINCOUNT`` says otherwise) and then sleeps; but while the process
holds more OpenMP threads than there are cores it spins only 100 times, so
nearly every region of a forward (hundreds of them) has to wake a sleeping
worker. A lane's pool beside the pool of the thread that loaded the models
is already one thread too many on two cores. ``release_openmp_pool`` ends the
calling thread's workers (``omp_pause_resource_all``); its next parallel
region makes them again. An engine calls it where a thread stops computing
for a while: the thread that starts it (it loaded and profiled the models),
and on a CPU whose lanes take turns, a lane at the end of a turn another lane
is waiting for and on an idle pass, so the pool of the lane holding the turn
is the only one. Starting the workers again costs about a scheduler time
slice on a busy machine, so a lane running turn after turn alone keeps its
workers (docs/results.md#openmp-workers-between-parallel-regions).
"""

from __future__ import annotations

import ctypes
import functools
import logging
from collections.abc import Callable
from pathlib import Path

import torch

log = logging.getLogger(__name__)
OMP_PAUSE_SOFT = 1  # omp_pause_soft: end the worker threads; the next parallel region starts them again


def use_intra_op_threads(threads: int) -> None:
    """Give the calling thread ``threads`` intra-op threads for every later parallel region it runs.

    Mutates the calling thread's count and torch's process-wide default (see the module docstring).
    """
    if threads < 1:
        raise ValueError(f"a lane needs at least one intra-op thread, got {threads}")
    torch.get_num_threads()  # this thread's lazy initialisation now, so it cannot overwrite the count below later
    torch.set_num_threads(threads)


def restore_process_threads(threads: int) -> None:
    """Put torch's process-wide intra-op count (and the calling thread's) back to ``threads``."""
    torch.get_num_threads()
    torch.set_num_threads(threads)


def lane_budget(total: int, lanes: int) -> int:
    """Intra-op threads per lane when ``lanes`` lanes share ``total`` threads at once: an even split, at least one."""
    if lanes < 1:
        raise ValueError(f"need at least one lane, got {lanes}")
    return max(1, total // lanes)


@functools.cache
def _pause_all() -> Callable[[int], int] | None:
    """libgomp's ``omp_pause_resource_all`` as loaded by torch, or None where torch's OpenMP runtime is another."""
    if "OpenMP" not in torch.__config__.parallel_info():
        return None
    maps = Path("/proc/self/maps")
    paths = (
        sorted({line.split()[-1] for line in maps.read_text().splitlines() if "/libgomp" in line})
        if maps.exists()
        else []
    )
    for path in paths:
        try:
            library = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL | getattr(ctypes, "RTLD_NOLOAD", 4))
            function = library.omp_pause_resource_all
        except (OSError, AttributeError):
            continue
        function.argtypes, function.restype = [ctypes.c_int], ctypes.c_int
        return function
    log.info(
        "OpenMP worker pools are kept: no loaded libgomp with omp_pause_resource_all (runtime: %s)",
        paths or "not libgomp",
    )
    return None


def release_openmp_pool() -> bool:
    """End the calling thread's OpenMP worker threads; False where the runtime cannot (see the module docstring).

    Safe between parallel regions only, which is everywhere Python code runs; the thread's next region
    starts its workers again.
    """
    pause = _pause_all()
    return pause is not None and pause(OMP_PAUSE_SOFT) == 0
