"""What this machine's CPU is: its model name and instruction-set flags (Linux ``/proc/cpuinfo``).

One reader for every place that needs them: the DL Boost target's host checks, and the
benchmarks, which name the CPU in every result they write.
"""

from __future__ import annotations

import platform
from pathlib import Path

__all__ = ["cpu_flags", "cpu_model"]

CPUINFO = Path("/proc/cpuinfo")


def _field(name: str) -> str | None:
    """The value of the first ``name`` line of ``/proc/cpuinfo``, or None (no such line, or
    not Linux)."""
    try:
        for line in CPUINFO.read_text().splitlines():
            if line.startswith(name):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_model() -> str:
    """The CPU's ``model name`` (e.g. ``"AMD EPYC"``), else :func:`platform.processor`, else
    ``"unknown"``."""
    return _field("model name") or platform.processor() or "unknown"


def cpu_flags() -> set[str]:
    """The CPU's instruction-set flags as ``/proc/cpuinfo`` spells them (``avx2``,
    ``avx512_vnni`` …); empty when there are none to read."""
    return set((_field("flags") or "").split())
