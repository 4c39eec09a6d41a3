"""Per-method call counts and latency percentiles over a bounded window."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

WINDOW = 2048


@dataclass
class _MethodWindow:
    calls: int = 0
    errors: int = 0
    latencies_ms: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list (0 for an empty list)."""
    if not sorted_values:
        return 0.0
    rank = max(0, min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1))))
    return sorted_values[rank]


class MethodStats:
    def __init__(self) -> None:
        self._by_method: dict[str, _MethodWindow] = {}

    def record(self, method: str, duration_ms: float, ok: bool) -> None:
        window = self._by_method.setdefault(method, _MethodWindow())
        window.calls += 1
        if not ok:
            window.errors += 1
        window.latencies_ms.append(duration_ms)

    def snapshot(self) -> dict[str, tuple[int, int, float, float]]:
        out: dict[str, tuple[int, int, float, float]] = {}
        for name, window in sorted(self._by_method.items()):
            values = sorted(window.latencies_ms)
            out[name] = (
                window.calls,
                window.errors,
                round(percentile(values, 0.50), 4),
                round(percentile(values, 0.95), 4),
            )
        return out
