"""``benchmarks/register_tiles.py`` and ``target_options.py``: the programs they compare are
points of the space they claim (every tile of the list, the same schedule otherwise), and the
accumulators they report are the register tile's."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

tvm = pytest.importorskip("tvm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import register_tiles, target_options  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import generate_space  # noqa: E402

TARGET = "dlboost -mcpu=cascadelake -num-cores=2"  # compiled only: any x86 host
WHOLE = f"{TARGET} {register_tiles.WHOLE_SPACE}"  # every listed schedule is a point of it


def test_every_listed_tile_is_a_point_differing_only_in_its_tile() -> None:
    params = {"M": 256, "N": 512, "K": 128}
    space = generate_space(ops.gemm(**params, dtype="int8"), WHOLE)
    tiles = [tuple(int(v) for v in t.split("x")) for t in register_tiles.TILES.split(",")]
    points = []
    for m, n in tiles:
        point = space.csp.complete(register_tiles.knobs(params, m, n))
        assert point is not None, (m, n)
        assert (point["C.v_i.S2"], point["C.v_j.S2"]) == (m, n)
        assert target_options.accumulators(point) == m * n
        points.append(point)
    tile_knobs = {"C.v_i.S1", "C.v_i.S2", "C.v_j.S1", "C.v_j.S2"}
    for other in points[1:]:
        differ = {k for k in space.csp.knobs if other[k] != points[0][k]}
        assert differ <= tile_knobs
    with pytest.raises(ValueError, match="no 16x1 tile"):
        register_tiles.knobs({"M": 64, "N": 512, "K": 128}, 16, 1)


def test_a_tuned_schedule_keeps_all_but_its_register_tile() -> None:
    """``--from-records``: a sampled schedule of G4's shape with its tile made 8 × 2 and 2 × 8
    is a point of the space whose other knobs (parallel, reduction, order, unroll) are the
    schedule's, each axis's S1 × S2 unchanged."""
    params = {"M": 32, "N": 1024, "K": 256}
    space = generate_space(ops.gemm(**params, dtype="int8"), WHOLE)
    tuned = space.csp.complete(
        {"C.v_i.S0": 1, "C.v_i.S1": 8, "C.v_i.S2": 4, "C.v_j.S0": 4, "C.v_j.S1": 4,
         "C.v_j.S2": 4, "C.v_k.R0": 16, "C.v_k.R1": 4, "C.order@S1.v_i": 2,
         "C.order@S1.v_j": 1, "C.write_back.pos": 1, "C.unroll": 0}
    )  # fmt: skip
    assert tuned is not None
    kept = {k for k in tuned if register_tiles.TUNED_KNOBS.match(k)}
    assert kept == set(space.csp.knobs)  # every knob of the stage, nothing derived
    for m, n in [(8, 2), (2, 8), (4, 4)]:
        point = space.csp.complete(register_tiles.tuned_knobs(tuned, m, n))
        assert point is not None, (m, n)
        assert (point["C.v_i.S2"], point["C.v_j.S2"]) == (m, n)
        for axis in ("v_i", "v_j"):
            s1s2 = point[f"C.{axis}.S1"] * point[f"C.{axis}.S2"]
            assert s1s2 == tuned[f"C.{axis}.S1"] * tuned[f"C.{axis}.S2"]
        differ = {k for k in kept if point[k] != tuned[k]}
        assert differ <= {"C.v_i.S1", "C.v_i.S2", "C.v_j.S1", "C.v_j.S2"}
    with pytest.raises(ValueError, match="no register tile of 64"):
        register_tiles.tuned_knobs(tuned, 64, 1)


def test_vpmaddwd_tiles_are_points_of_the_general_target() -> None:
    """On ``dlboost -general`` for a CPU without VNNI (``znver3``: AVX2), the same schedule is
    split by the ``vpmaddwd`` intrinsic's 8 lanes × 2: every listed tile is a point."""
    params = {"M": 256, "N": 512, "K": 128}
    space = generate_space(
        ops.gemm(**params, dtype="int8"),
        "llvm -mcpu=znver3 -num-cores=2 " + register_tiles.WHOLE_SPACE,
    )
    assert [i.name for i in space.target.intrinsics if i.a_dtype == "uint8"] == [
        "heronlike_avx2_pmaddwd_8x2_s16s8s32"  # A read from the kernel's int16 copy
    ]
    for m, n in [(1, 8), (2, 4), (4, 2), (8, 1), (2, 2)]:
        point = space.csp.complete(register_tiles.knobs(params, m, n, (8, 2)))
        assert point is not None, (m, n)
        assert (point["C.v_i.S2"], point["C.v_j.S2"]) == (m, n)
        lanes = point["C.v_j.S0"] * point["C.v_j.S1"] * point["C.v_j.S2"] * 8
        assert lanes == params["N"]
        assert point["C.v_k.R0"] * point["C.v_k.R1"] * 2 == params["K"]
    with pytest.raises(ValueError, match="no 1x64 tile"):
        register_tiles.knobs(params, 1, 64, (8, 2))


def test_accumulators_of_sampled_programs() -> None:
    space = generate_space(ops.gemm(64, 256, 64, dtype="int8"), TARGET)
    for point in RandSAT(space.csp, seed=1).sample(6):
        assert target_options.accumulators(point) == point["C.v_i.S2"] * point["C.v_j.S2"]


def test_target_options_runs_both_arms_end_to_end(tmp_path: Path) -> None:
    """The benchmark as a user runs it, at the smallest budget: both arms tuned, timed side by
    side and written to one CSV row per seed (it once failed before its first tune)."""
    import csv

    argv = ["--cases", "gemm:16,32,32", "--trials", "2", "--batch", "2", "--seeds", "1",
            "--rounds", "1", "--options=-all-guards=1", "--out", str(tmp_path)]  # fmt: skip
    assert target_options.main(argv) == 0
    (path,) = tmp_path.glob("target_options-*.csv")
    (row,) = csv.DictReader(path.open())
    assert float(row["option_final_ms"]) > 0 and float(row["base_final_ms"]) > 0
    assert row["options"] == "-all-guards=1"
