"""benchmarks/peak.py: the register-only FMA / VNNI loops compile, run and count operations."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import peak  # noqa: E402


def test_measures_every_kernel_this_cpu_has() -> None:
    flags = peak.cpu_flags()
    expected = {n for n, k in peak.KERNELS.items() if set(k[0]) <= flags}
    if not expected:
        pytest.skip("no FMA or VNNI on this CPU")
    rows = peak.measure_peaks(threads=[1], repeats=1, seconds=0.02)
    assert {r["kernel"] for r in rows} == expected
    for r in rows:
        # between 1 and 64 instructions' worth of ops per ns on one core: a loop the compiler
        # removed (too fast) or a mis-count (too slow) fails
        ops_per_instruction = peak.KERNELS[str(r["kernel"])][2]
        per_ns = float(r["ops_per_s"]) / 1e9 / ops_per_instruction
        assert 0.5 < per_ns < 64, r
