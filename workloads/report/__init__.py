"""Reports of finished runs.

* ``table`` – the plain-text summary table the CLI prints;
* ``html``  – the shareable one-file HTML report of run directories (``python -m workloads report``).
"""
