"""``benchmarks/process_modes.py``: a tile's serial twin is the same tile on one core, both
compute the GEMV exactly, and a short run times each in processes of its own."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

tvm = pytest.importorskip("tvm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import process_modes, suite  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.csp import Eq  # noqa: E402
from heronlike.kernel import BuiltKernel  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import generate_space  # noqa: E402


def _parallel_point(space):  # noqa: ANN001, ANN202
    """A point of ``space`` whose parallel loop has at least two iterations."""
    s0 = next(k for k in space.csp.knobs if k.endswith(".S0"))
    for p in RandSAT(space.csp, seed=3).sample(16, extra=[Eq(f"{s0.split('.')[0]}.serial", 0)]):
        if p[s0] >= 2:
            return p
    raise AssertionError("no parallel point sampled")


def test_the_serial_twin_is_the_same_tile_on_one_core_and_exact() -> None:
    space = generate_space(ops.gemv(256, 64), "llvm")
    point = _parallel_point(space)
    twin = process_modes.serial_twin(point, space)
    assert twin["y.serial"] == 1 and twin["y.v_i.S0"] == 1
    assert twin["y.v_i.S1"] == point["y.v_i.S0"] * point["y.v_i.S1"]
    same = [k for k in space.csp.knobs if not k.endswith((".S0", ".S1", ".serial"))]
    assert {k: twin[k] for k in same} == {k: point[k] for k in same}
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, 64, dtype=np.uint8)
    A = rng.integers(-128, 128, (256, 64), dtype=np.int8)
    expected = A.astype(np.int64) @ x.astype(np.int64)
    for p in (point, twin):
        kernel = BuiltKernel(space, p, space.target.tvm_target())
        np.testing.assert_array_equal(kernel(x, A), expected)
    gemm = generate_space(ops.gemm(64, 64, 256), "llvm")  # 2 Mop: no serial knob
    with pytest.raises(ValueError, match="serial"):
        process_modes.serial_twin(RandSAT(gemm.csp, seed=0).sample(1)[0], gemm)


def test_a_short_run_times_each_kernel_in_its_own_processes(tmp_path: Path) -> None:
    """GV4 (512 x 256), one process per kernel of 12 measurements of 5 calls: a row each, the
    outputs checked in the child (a wrong kernel raises there), times and launch positive."""
    case = suite.case_compute("GV4", "int8", suite.resolve_mode("auto", None))
    space = generate_space(case.compute, case.target)
    point = _parallel_point(space)
    text = ",".join(f"{k.split('.', 1)[1]}={point[k]}" for k in space.csp.knobs)
    argv = ["--cases", "GV4", "--point", text, "--processes", "1", "--repeats", "12"]
    process_modes.main([*argv, "--calls", "5", "--out", str(tmp_path)])
    (path,) = tmp_path.glob("process_modes-*.csv")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["kernel"] for r in rows] == ["parallel", "serial"]
    for r in rows:
        assert r["case"] == "GV4" and r["point"] == text
        assert 0 < float(r["steady_low_us"]) <= float(r["steady_us"]) <= float(r["steady_high_us"])
        assert float(r["first_us"]) > 0 and float(r["launch_us"]) > 0
    with pytest.raises(SystemExit):
        process_modes.main(["--repeats", "10", "--out", str(tmp_path)])
