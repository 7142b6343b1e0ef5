"""What runs only where a GPU is: decode and verify forwards replayed as CUDA graphs.

``graph_plan`` decides, as a pure function of a forward's shape, whether it
replays a captured graph (and which bucket) or runs eagerly, and why;
``graph_index`` builds the fixed-shape index tensors a captured forward reads;
``graph_runner`` is the ``ModelRunner`` wrapper that captures, replays and
counts its choices. On the CPU the same wrapper runs every forward eagerly.
"""
