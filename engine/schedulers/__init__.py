"""The schedulers: one ``Engine`` interface, three policies for running its stages.

``base`` holds the interface and the machinery every engine shares, ``colocated``
the AR reference and Baseline (one loop), ``pd`` two lanes, ``pdv`` three;
``lanes`` the threads and the device arbiter; ``registry`` builds one by name.
"""
