"""The benchmark suite end to end on one tiny case (excluded from the default test run).

Runs ``benchmarks/suite.py`` as the user does, with 2 trials per tuner on an int8 GEMM 64×64×64:
heronlike, MetaSchedule, PyTorch and numpy all measured in one process run; checks the CSV and
the chart. About a minute (most of it MetaSchedule's start-up).

    .venv/bin/pytest -m benchmark tests/test_suite.py
"""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import suite  # noqa: E402


def test_heron_cases_convert_to_api_order() -> None:
    # GEMM is (M, K, N) in Heron's table; C1D and C3D list CO before CI
    assert suite.parse_case("G3")[2] == {"M": 32, "N": 1000, "K": 2048}
    assert suite.parse_case("B2")[2] == {"B": 12, "M": 512, "N": 64, "K": 512}
    c1d = suite.parse_case("C1D1")[2]
    assert (c1d["CI"], c1d["CO"]) == (1024, 512)
    c3d = suite.parse_case("C3D2")[2]
    assert (c3d["CI"], c3d["CO"], c3d["stride"]) == (128, 64, 2)
    assert suite.parse_case("gemm:8,16,32")[2] == {"M": 8, "N": 16, "K": 32}
    with pytest.raises(ValueError):
        suite.parse_case("gemm:8,16")
    with pytest.raises(ValueError):
        suite.parse_case("G9")


def test_pack_weight_matches_the_index_map() -> None:
    np = pytest.importorskip("numpy")
    from benchmarks.metaschedule import pack_weight, packed_index

    w = np.arange(32 * 3 * 8).reshape(32, 3, 8)  # (CO, KW, CI)
    packed = pack_weight(w, 0, 2)
    index = packed_index(3, 0, 2)
    for co, kw, ci in [(0, 0, 0), (17, 2, 5), (31, 1, 7)]:
        assert packed[index(co, kw, ci)] == w[co, kw, ci]


@pytest.mark.benchmark
@pytest.mark.skipif(
    not __import__("heronlike.dla_targets.dlboost", fromlist=["x"]).host_has_vnni(),
    reason="the suite tunes DL Boost kernels: needs AVX512-VNNI",
)
def test_suite_runs_one_tiny_case_end_to_end(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "suite.py"),
            "--cases",
            "gemm:64,64,64",
            "--trials",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,  # the suite must not depend on the working directory
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (csv_path,) = tmp_path.glob("suite-*.csv")
    (row,) = list(csv.DictReader(csv_path.open()))
    assert row["heronlike_status"] == "ok" and row["heronlike_correct"] == "True"
    assert row["ms_status"] == "ok" and row["ms_correct"] == "True"
    assert int(row["heronlike_trials"]) == 2 and int(row["ms_trials"]) >= 1
    for who in ("heronlike", "ms", "pytorch", "numpy"):
        assert float(row[f"{who}_ms"]) > 0, who
    assert float(row["speedup_vs_ms"]) == pytest.approx(
        float(row["ms_ms"]) / float(row["heronlike_ms"])
    )
    assert row["pytorch_impl"].startswith("torch._int_mm")
    assert "geomean speedup of heronlike" in proc.stdout
    assert list(tmp_path.glob("suite-*.png"))
