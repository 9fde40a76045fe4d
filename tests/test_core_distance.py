"""``benchmarks/core_distance.py``: tiles named by knob changes on a base tile, checked exact and
timed in the same turns, each turn labelled by the core-to-core round trip before it."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

pytest.importorskip("tvm")

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import core_distance, peak, suite  # noqa: E402
from heronlike.sampler import RandSAT  # noqa: E402
from heronlike.space import generate_space  # noqa: E402

SPEC = "gemm:64,64,256"


def _space_and_base():  # noqa: ANN202
    case = suite.case_compute(SPEC, "int8", suite.resolve_mode("auto", None))
    space = generate_space(case.compute, case.target)
    point = RandSAT(space.csp, seed=1).sample(1)[0]
    base = ",".join(f"{k.split('.', 1)[1]}={point[k]}" for k in space.csp.knobs)
    return space, point, base


def test_a_varied_point_is_the_base_with_the_changes_over_it() -> None:
    space, point, base = _space_and_base()
    assert core_distance.varied_point(space, base, "") == point
    unroll = next(k for k in space.csp.knobs if k.endswith(".unroll"))
    others = RandSAT(space.csp, seed=2).sample(16)
    other = next(p[unroll] for p in others if p[unroll] != point[unroll])
    varied = core_distance.varied_point(space, base, f"unroll={other}")
    assert varied[unroll] == other
    assert {k: varied[k] for k in space.csp.knobs if k != unroll} == {
        k: point[k] for k in space.csp.knobs if k != unroll
    }
    with pytest.raises(ValueError, match="names 0 knobs"):
        core_distance.varied_point(space, base, "no_such_knob=1")
    with pytest.raises(ValueError, match="leaves out"):
        core_distance.varied_point(space, base.split(",", 1)[1], "")


def test_a_short_run_labels_every_turn(tmp_path: Path) -> None:
    """Two tiles (the base twice, under two names), 3 turns: a row each, both timed in every
    turn, the turns split into near and far."""
    if peak.round_trip_cpus() is None:
        pytest.skip("one core: no round trip to label the turns with")
    _, _, base = _space_and_base()
    argv = ["--cases", SPEC, "--base", base, "--point", "a:", "--point", "b:", "--turns", "3"]
    core_distance.main([*argv, "--out", str(tmp_path)])
    (path,) = tmp_path.glob("core_distance-*.csv")
    with path.open() as f:
        rows = list(csv.DictReader(f))
    assert [r["tile"] for r in rows] == ["a", "b"]
    for r in rows:
        assert int(r["near_turns"]) + int(r["far_turns"]) == 3 and int(r["near_turns"]) >= 1
        assert float(r["near_us"]) > 0 and float(r["round_trip_near_ns"]) > 0
    with pytest.raises(SystemExit):
        core_distance.main(["--point", "no_colon", "--out", str(tmp_path)])
