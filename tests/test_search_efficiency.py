"""The surrogate search benchmark (benchmarks/search_efficiency.py --record/--surrogate) and the
picks its hardware confirmation (benchmarks/search_confirm.py) reads: a real, small recording of
a float32 GEMM on this CPU, then Heron Fig. 12's explorers on its surrogate."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXPLORERS = ("cga", "random", "sa", "ga")


def _rows(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    sys.path.insert(0, str(REPO / "benchmarks"))
    import search_efficiency

    out = tmp_path_factory.mktemp("se")
    argv = ["--record", "24", "--sim-op", "gemm", "--shape", "64,64,64", "--seeds", "2"]
    argv += ["--trials", "16", "--rand-trials", "16", "--batch-size", "8"]
    argv += ["--explorers", ",".join(EXPLORERS), "--work", str(out), "--out", str(out)]
    assert search_efficiency.run(argv) == 0
    (runs,) = [
        p
        for p in out.glob("search_efficiency_sim-gemm64x64x64-t16-*.csv")
        if not p.stem.endswith(("_curves", "_summary"))
    ]
    return {"out": out, "runs": runs, "module": search_efficiency}


def test_every_explorer_runs_every_seed_to_its_budget(simulated: dict) -> None:
    rows = _rows(simulated["runs"])
    assert sorted((r["explorer"], r["seed"]) for r in rows) == sorted(
        (e, str(s)) for e in EXPLORERS for s in range(2)
    )
    assert all(int(r["trials"]) == 16 for r in rows)


def test_curves_are_best_so_far_and_end_at_the_reported_best(simulated: dict) -> None:
    runs = {(r["explorer"], r["seed"]): r for r in _rows(simulated["runs"])}
    curves = _rows(simulated["runs"].with_name(simulated["runs"].stem + "_curves.csv"))
    by: dict[tuple[str, str], list[dict]] = {}
    for c in curves:
        by.setdefault((c["explorer"], c["seed"]), []).append(c)
    assert set(by) == set(runs)
    for key, pts in by.items():
        best = [float(p["best_gops"]) for p in pts]
        assert best == sorted(best), key  # best-so-far never drops
        assert [int(p["trials"]) for p in pts] == [8, 16], key  # one point per batch
        assert best[-1] == pytest.approx(float(runs[key]["best_gflops_final"]), abs=1e-3)
    # every committed result names the machine: the surrogate's records were measured here
    assert {(c["cpu_model"], c["measured_on"]) for c in curves} == {(runs[key]["cpu_model"],) * 2}


def test_every_best_assignment_is_a_valid_point_of_the_space(simulated: dict) -> None:
    _, space = simulated["module"]._sim_space("gemm", "64,64,64")
    for r in _rows(simulated["runs"]):
        assert space.misfits(json.loads(r["best_assignment_final"])) == [], r["explorer"]


def test_summary_pairs_cga_with_every_other_explorer(simulated: dict) -> None:
    summary = _rows(simulated["runs"].with_name(simulated["runs"].stem + "_summary.csv"))
    whats = {r["what"] for r in summary}
    assert {f"{e}@16" for e in EXPLORERS} <= whats
    assert {"cga@16 - random@16", "cga@16 - sa@16", "cga@16 - ga@16"} <= whats
    for r in summary:
        assert float(r["ci_lo"]) <= float(r["mean"]) <= float(r["ci_hi"]), r


def test_confirm_picks_each_runs_best_seed_by_seed(simulated: dict) -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    from search_confirm import read_picks

    picks = read_picks(simulated["runs"], ("cga", "sa"))
    assert list(picks) == ["cga-s0", "sa-s0", "cga-s1", "sa-s1"]
    runs = {(r["explorer"], int(r["seed"])): r for r in _rows(simulated["runs"])}
    for p in picks.values():
        row = runs[(p["label"], p["seed"])]
        assert p["assignment"] == json.loads(row["best_assignment_at_trials"])
        assert p["sim_gflops"] == float(row["best_gflops_at_trials"])
    with pytest.raises(SystemExit, match="no run of opevo"):
        read_picks(simulated["runs"], ("opevo",))
