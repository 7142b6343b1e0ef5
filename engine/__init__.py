"""PD-Verify engines: speculative decoding with three scheduling architectures.

Data flows one way: ``workloads`` builds requests, an engine from this package
runs them, ``metrics`` reads the finished ``Request`` records.
"""
