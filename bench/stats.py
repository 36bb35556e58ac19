"""Latency summaries."""

from __future__ import annotations

import statistics
from typing import Any


def percentile(samples: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation; samples in seconds."""
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary_ms(samples: list[float]) -> dict[str, Any]:
    """n, p50, p90, p99 and mean in milliseconds."""
    return {
        "n": len(samples),
        "p50_ms": round(percentile(samples, 50) * 1000, 4),
        "p90_ms": round(percentile(samples, 90) * 1000, 4),
        "p99_ms": round(percentile(samples, 99) * 1000, 4),
        "mean_ms": round(statistics.fmean(samples) * 1000, 4) if samples else None,
    }


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return round(numerator / denominator, 3)
