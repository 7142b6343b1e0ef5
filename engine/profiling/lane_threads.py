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
"""

from __future__ import annotations

import torch


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

