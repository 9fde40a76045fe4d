"""What this machine's CPU is: its model name and instruction-set flags (Linux ``/proc/cpuinfo``),
and how many threads TVM's runtime gives a kernel here (:func:`use_cpu_threads`).

One reader for every place that needs them: the DL Boost target's host checks, and the
benchmarks, which name the CPU in every result they write.
"""

from __future__ import annotations

import os
import platform
import re
import time
import warnings
from pathlib import Path

__all__ = [
    "cpu_flags",
    "cpu_model",
    "cpu_signature",
    "machine_slug",
    "machine_stamp",
    "use_cpu_threads",
]

#: the variables TVM's thread pool reads its size from, in its order of preference
TVM_THREAD_VARS = ("TVM_NUM_THREADS", "OMP_NUM_THREADS")

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


def machine_slug() -> str:
    """The CPU in a result file's name: its lower-case model name in ``-``-joined words, then
    family and model as ``f<family>m<model>`` (``"amd-epyc-f25m1"``: Zen 3, ``"amd-epyc-f26m2"``:
    Zen 5), so runs on two CPUs sharing a generic model name on the same day do not overwrite
    each other's files."""
    name = re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-")
    family, model = _field("cpu family"), _field("model\t")
    return f"{name}-f{family}m{model}" if family and model else name


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


def use_cpu_threads(threads: int) -> int:
    """Give the kernels this thread of this process runs on TVM's CPU thread pool ``threads``
    threads (the cores they were tuned for), unless the user chose a number with
    ``TVM_NUM_THREADS`` or ``OMP_NUM_THREADS``; returns the threads the pool uses.

    Why: without either variable, TVM sizes its pool to half of ``hardware_concurrency()`` on
    x86, assuming two hyper-threads per core. On a machine without SMT (a 2-vCPU cloud VM) that
    is half the cores: an int8 BERT-base compiled for 2 cores ran at 356 ms in one thread
    against 204 ms in two (AMD EPYC Zen 3, 2026-11-27). The pool is created, once per thread, by the
    first parallel kernel: a pool created earlier with fewer threads cannot grow, and a
    ``RuntimeWarning`` says so and how to fix it.

    Raises:
        ValueError: ``threads`` < 1.
    """
    import tvm

    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    chosen = any(os.environ.get(v) for v in TVM_THREAD_VARS)
    if not chosen:
        os.environ["TVM_NUM_THREADS"] = str(threads)
    pool_threads = tvm.get_global_func("runtime.NumThreads")
    have = int(pool_threads())  # creates this thread's pool, sized by the variables above
    if have > threads and not chosen:
        tvm.get_global_func("runtime.config_threadpool")(1, threads)  # 1: TVM's kBig mode
        have = int(pool_threads())
    elif have < threads and not chosen:
        warnings.warn(
            f"TVM's thread pool in this thread already runs {have} thread(s), fewer than the "
            f"{threads} cores the kernels were tuned for (it was created before, by another "
            f"kernel); set TVM_NUM_THREADS={threads} before the first kernel runs",
            RuntimeWarning,
            stacklevel=2,
        )
    return have
