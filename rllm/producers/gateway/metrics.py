"""Gateway metrics in the Prometheus text format, without a client library."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable

__all__ = ["Metrics"]

_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


def _labels(pairs: tuple[tuple[str, str], ...]) -> str:
    if not pairs:
        return ""
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"'
        for k, v in pairs
    )
    return "{" + inner + "}"


class _Histogram:
    def __init__(self) -> None:
        self.counts = [0] * (len(_BUCKETS_S) + 1)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(_BUCKETS_S, value)] += 1
        self.total += value
        self.n += 1


class Metrics:
    """Counters, histograms (seconds) and gauges read at scrape time."""

    _HELP = {
        "rllm_gateway_requests_total": "Requests by API and status.",
        "rllm_gateway_errors_total": "Failed calls by kind.",
        "rllm_gateway_events_total": "Events published (or spooled) by outcome.",
        "rllm_gateway_upstream_latency_seconds": "Upstream latency.",
        "rllm_gateway_added_latency_seconds": (
            "Time the gateway spent on an LLM call (its step's overhead_ms): arrival to the "
            "step's capture, less the upstream; not the Kafka ack wait nor the answer's sending."
        ),
        "rllm_gateway_produce_latency_seconds": "Time from publish to Kafka's ack.",
    }

    def __init__(self) -> None:
        self._counters: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
        self._hists: dict[str, _Histogram] = defaultdict(_Histogram)
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}

    def inc(self, name: str, value: float = 1.0, **labels: str) -> None:
        """Add to a counter."""
        key = tuple(sorted(labels.items()))
        series = self._counters[name]
        series[key] = series.get(key, 0.0) + value

    def observe(self, name: str, seconds: float) -> None:
        """Record one duration in a histogram."""
        self._hists[name].observe(seconds)

    def gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        """Register a gauge read at scrape time."""
        self._gauges[name] = (help_text, read)

    def counter_value(self, name: str, **labels: str) -> float:
        """One counter's current value (0 if never set)."""
        return self._counters.get(name, {}).get(tuple(sorted(labels.items())), 0.0)

    def render(self) -> str:
        """The Prometheus text exposition."""
        lines: list[str] = []
        for name, series in sorted(self._counters.items()):
            lines += [f"# HELP {name} {self._HELP.get(name, name)}", f"# TYPE {name} counter"]
            lines += [f"{name}{_labels(k)} {v:g}" for k, v in sorted(series.items())]
        for name, h in sorted(self._hists.items()):
            lines += [f"# HELP {name} {self._HELP.get(name, name)}", f"# TYPE {name} histogram"]
            cumulative = 0
            for bound, count in zip((*_BUCKETS_S, float("inf")), h.counts, strict=True):
                cumulative += count
                le = "+Inf" if bound == float("inf") else f"{bound:g}"
                lines.append(f'{name}_bucket{{le="{le}"}} {cumulative}')
            lines += [f"{name}_sum {h.total:.6f}", f"{name}_count {h.n}"]
        for name, (help_text, read) in sorted(self._gauges.items()):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {read():g}"]
        return "\n".join(lines) + "\n"
