"""Measure CUDA kernels on this machine's GPU through CuPy, without a CUDA-enabled TVM.

PyPI's ``apache-tvm`` has no CUDA runtime, so the TVM :class:`~heronlike.measure.LocalRunner`
cannot launch a cubin. CuPy can: :class:`CupyRunner` is a
:class:`~heronlike.measure.bundle.BundleRunner` whose command is the bundle's own
``run_bundle.py`` run with this Python on this machine. Every batch becomes a bundle in a
temporary folder (removed after its results are read), ``run_bundle.py`` loads each cubin with
``cupy.RawModule``, runs the launch manifest, checks the outputs (poisoned first) against the
reference it computes, and times the candidate with CUDA events, each workload in a killable
worker subprocess. The tuning process itself never initialises CUDA.

Install CuPy with ``pip install "heronlike[cuda]"`` (``cupy-cuda12x``; with a CUDA 13 driver
``pip install cupy-cuda13x`` instead).

Runner specs (``HERONLIKE_RUNNER`` or ``--runner``, read by
:func:`heronlike.measure.rpc.runner_from_spec`): ``cupy`` (this machine's GPU) and
``cupy+standin`` (``run_bundle.py --standin``: validates each bundle and launches nothing; every
candidate gets error kind ``"standin"`` and no latency, for tests on machines without a GPU).

:func:`gpu_probe` asks a short-lived subprocess whether CuPy is importable and sees a GPU;
the TensorCore target's ``make_runner`` chooses this runner when it does.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, NamedTuple

from heronlike.errors import CUPY_INSTALL_HINT, HostFeatureError
from heronlike.measure.bundle import DEFAULT_FLUSH_L2_BYTES, DEFAULT_WARMUP, BundleRunner

__all__ = [
    "CUPY_SPEC",
    "CUPY_STANDIN_SPEC",
    "INSTALL_HINT",
    "CupyRunner",
    "GpuProbe",
    "gpu_probe",
    "require_cupy",
]

#: the runner spec of this machine's GPU through CuPy
CUPY_SPEC = "cupy"
#: the runner spec of the stand-in (nothing launched; every result has error kind "standin")
CUPY_STANDIN_SPEC = "cupy+standin"
#: what to install for the CuPy runner
INSTALL_HINT = CUPY_INSTALL_HINT
#: seconds the GPU probe may take (importing CuPy and asking the driver; no context is made)
PROBE_TIMEOUT_S = 60.0

_PROBE_CODE = "import cupy; print(cupy.cuda.runtime.getDeviceCount())"


class GpuProbe(NamedTuple):
    """What :func:`gpu_probe` found: ``devices`` CUDA devices CuPy sees (0: none or no CuPy)
    and ``reason``, a short sentence saying why there are none (empty when there are some)."""

    devices: int
    reason: str


def gpu_probe(timeout_s: float = PROBE_TIMEOUT_S) -> GpuProbe:
    """Whether CuPy is importable and sees a CUDA GPU, asked in a subprocess.

    The subprocess (this Python) imports CuPy and prints
    ``cupy.cuda.runtime.getDeviceCount()``; this process never initialises CUDA. Never
    raises: a missing CuPy, a missing driver, a crash or a probe past ``timeout_s`` seconds
    give ``GpuProbe(0, why)``.
    """
    if importlib.util.find_spec("cupy") is None:
        return GpuProbe(0, "CuPy is not installed")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _PROBE_CODE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return GpuProbe(0, f"asking CuPy for the GPUs took longer than {timeout_s:g} s")
    except OSError as exc:
        return GpuProbe(0, f"cannot run {sys.executable}: {exc}")
    lines = (proc.stdout or "").strip().splitlines()
    if proc.returncode != 0 or not lines or not lines[-1].strip().isdigit():
        tail = ((proc.stderr or "") + (proc.stdout or "")).strip().splitlines()[-1:]
        return GpuProbe(0, f"CuPy cannot reach a GPU: {' '.join(tail)[-300:] or 'no output'}")
    count = int(lines[-1])
    return GpuProbe(count, "" if count > 0 else "CuPy sees no CUDA device")


def require_cupy() -> None:
    """Raise when CuPy is not importable here (it is not imported, and CUDA not initialised).

    Raises:
        HostFeatureError: CuPy is not installed; the message names ``heronlike[cuda]``.
    """
    if importlib.util.find_spec("cupy") is None:
        raise HostFeatureError(f"the cupy runner needs CuPy on this machine: {INSTALL_HINT}")


class CupyRunner(BundleRunner):
    """A :class:`~heronlike.measure.bundle.BundleRunner` that runs each batch's bundle on this
    machine's GPU through CuPy (``run_bundle.py``), or with ``standin`` through
    ``run_bundle.py --standin`` (launches nothing).

    Args:
        standin: validate and launch nothing: every candidate gets error kind ``"standin"``
            and no latency (the stand-in's fake latencies are never taken as measurements).
        work_dir: where the bundles are written; ``None``: a fresh temporary folder, removed
            by :meth:`close`. Each bundle is removed once its results are read unless
            ``keep``.
        timeout_s: seconds one candidate may take on the GPU before its worker is killed
            (``run_timeout``).
        number, repeat: calls per measurement and measurements per candidate (the latency is
            the median of the per-call means, seconds).
        warmup, flush_l2_bytes: calls before timing; bytes written to flush the L2 cache before
            each measurement.
        keep: keep each bundle folder (to inspect it, or rerun it by hand).
        **ignored: other evaluator settings of the tune (``min_repeat_ms``: CUDA events need no
            minimum), accepted and unused.
    """

    def __init__(
        self,
        *,
        standin: bool = False,
        work_dir: str | os.PathLike[str] | None = None,
        timeout_s: float = 30.0,
        number: int = 3,
        repeat: int = 5,
        warmup: int = DEFAULT_WARMUP,
        flush_l2_bytes: int = DEFAULT_FLUSH_L2_BYTES,
        keep: bool = False,
        **ignored: Any,
    ) -> None:
        self.standin = bool(standin)
        self._own_dir = work_dir is None
        folder = Path(tempfile.mkdtemp(prefix="heronlike-cupy-")) if work_dir is None else work_dir
        # the bundle's own copy of run_bundle.py: run from heronlike/measure, its folder would
        # come first on sys.path and its cuda.py shadow the cuda package CuPy imports
        super().__init__(
            folder,
            None,
            None,
            number=number,
            repeat=repeat,
            warmup=warmup,
            flush_l2_bytes=flush_l2_bytes,
            timeout_s=timeout_s,
            keep=keep,
            script_args=["--standin"] if self.standin else [],
        )

    @property
    def spec(self) -> str:
        """This runner's spec string (``cupy`` or ``cupy+standin``)."""
        return CUPY_STANDIN_SPEC if self.standin else CUPY_SPEC

    def __repr__(self) -> str:
        return (
            f"CupyRunner({self.spec!r}, number={self.number}, repeat={self.repeat}, "
            f"timeout_s={self.timeout_s:g})"
        )

    def close(self) -> None:
        """Remove the temporary work folder (when this runner made it). Idempotent."""
        if self._own_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)
            self._own_dir = False
