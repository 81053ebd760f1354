"""The multi-node drill on one machine (issue 29): nodes, clients, phases.

Shared by the full benchmark (``scripts/bench/cluster.py``) and its short form in
the test suite (``tests/ops/test_cluster_drill.py``), as ``scripts/processes.py`` is:
the tests may not import benchmark code. Every node listens on 127.0.0.1 only.
"""
