"""Helpers of the fault table (``perf/faults.py``): the whole pipeline in its own processes
on a fresh broker, sessions driven through the gateway, faults injected, and everything
counted end to end."""
