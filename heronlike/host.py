"""What this machine's CPU is: its model name and instruction-set flags (Linux ``/proc/cpuinfo``).

One reader for every place that needs them: the DL Boost target's host checks, and the
benchmarks, which name the CPU in every result they write.
"""

from __future__ import annotations

import platform
import time
from pathlib import Path

__all__ = ["cpu_flags", "cpu_model", "cpu_signature", "machine_stamp"]

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


def cpu_signature() -> str:
    """The CPU's family, model and stepping as ``/proc/cpuinfo`` gives them (e.g. ``"family 25
    model 17 stepping 1"``, AMD Zen 4), which tells apart CPUs that share a generic ``model name``
    such as ``"AMD EPYC"``; ``""`` where they cannot be read."""
    parts = [(k, _field(k)) for k in ("cpu family", "model\t", "stepping")]
    return " ".join(f"{k.split()[-1]} {v}" for k, v in parts if v)


def machine_stamp() -> dict[str, str]:
    """The columns that name the machine and day of a committed result row: ``cpu_model``,
    ``cpu_signature`` (see :func:`cpu_signature`) and ``date`` (``YYYY-MM-DD``, local time)."""
    return dict(
        cpu_model=cpu_model(), cpu_signature=cpu_signature(), date=time.strftime("%Y-%m-%d")
    )


def cpu_flags() -> set[str]:
    """The CPU's instruction-set flags as ``/proc/cpuinfo`` spells them (``avx2``,
    ``avx512_vnni`` …); empty when there are none to read."""
    return set((_field("flags") or "").split())
