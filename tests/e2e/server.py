"""The process harness the benchmarks use, shared with the end-to-end tests."""

from scripts.processes import RunningServer, free_port, run_processes

__all__ = ["RunningServer", "free_port", "run_processes"]
