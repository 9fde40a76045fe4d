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


def test_measured_summary_names_each_ops_machine_and_pairs_remeasured_bests(
    tmp_path: Path,
) -> None:
    """``--summarize`` rebuilds the summary of measured runs from the committed CSVs: each op's
    rows are stamped with the machine of that op's own runs (two ops measured on two CPUs stay
    apart), and CGA is paired with every explorer on the re-measured bests too."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import search_efficiency

    runs, curves = [], []
    best = {"cga": (10.0, 12.0, 14.0), "rand": (9.0, 9.5, 13.0)}
    again = {"cga": (9.0, 11.0, 13.0), "rand": (8.0, 10.0, 11.0)}
    for op, cpu in (("gemm", "CPU A"), ("c2d", "CPU B")):
        for explorer, budget in (("cga", 200), ("rand", 600)):
            for seed in range(3):
                machine = dict(cpu_model=cpu, cpu_signature="family 1", date="2026-11-24")
                runs.append(
                    dict(
                        op=op,
                        explorer=explorer,
                        seed=seed,
                        trials=budget,
                        best_gops_at_trials=best[explorer][seed] - (explorer == "rand"),
                        best_gops_final=best[explorer][seed],
                        remeasured_gops=again[explorer][seed],
                        explorer_share=0.1,
                        loop_s=1.0,
                        stats="{}",
                        **machine,
                    )
                )
                curves.append(
                    dict(
                        op=op,
                        explorer=explorer,
                        seed=seed,
                        trials=budget,
                        elapsed_s=1.0,
                        best_gops=best[explorer][seed],
                        **machine,
                    )
                )
    for name, rows in (("runs", runs), ("curves", curves)):
        with (tmp_path / f"search_efficiency_{name}.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    assert search_efficiency.run(["--summarize", "--out", str(tmp_path)]) == 0
    summary = {(r["op"], r["what"]): r for r in _rows(tmp_path / "search_efficiency_summary.csv")}
    assert {r["cpu_model"] for (op, _), r in summary.items() if op == "gemm"} == {"CPU A"}
    assert {r["cpu_model"] for (op, _), r in summary.items() if op == "c2d"} == {"CPU B"}
    # Heron's CGA@200 - RAND@600 on the tuning-time bests: (10-9 + 12-9.5 + 14-13) / 3
    assert float(summary[("gemm", "cga@200 - rand@600")]["mean"]) == pytest.approx(
        4.5 / 3, abs=1e-3
    )
    # and on the re-measured bests: (9-8 + 11-10 + 13-11) / 3
    row = summary[("gemm", "cga@200 - rand@600 remeasured")]
    assert float(row["mean"]) == pytest.approx(4 / 3, abs=1e-3)
    assert float(row["ci_lo"]) < 4 / 3 < float(row["ci_hi"])
    assert float(summary[("c2d", "rand@600 remeasured")]["mean"]) == pytest.approx(29 / 3, abs=1e-3)
    with pytest.raises(SystemExit, match="no search_efficiency_runs.csv"):
        search_efficiency.run(["--summarize", "--out", str(tmp_path / "empty")])


def test_rows_of_an_op_rerun_on_another_cpu_are_not_merged(tmp_path: Path) -> None:
    """Re-running one explorer keeps the other explorers' rows of that op only when they were
    measured on the same CPU: CGA is never paired with a run from another machine."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    import search_efficiency

    def row(op: str, explorer: str, cpu: str) -> dict:
        return dict(op=op, explorer=explorer, seed=0, trials=8, cpu_model=cpu, cpu_signature="")

    path = tmp_path / "search_efficiency_runs.csv"
    old = [row("gemm", "cga", "A"), row("gemm", "sa", "A"), row("c2d", "sa", "A")]
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(old[0]))
        w.writeheader()
        w.writerows(old)
    merged = search_efficiency._merge(path, [row("gemm", "cga", "B")], {("gemm", "cga")}, False)
    assert [(r["op"], r["explorer"], r["cpu_model"]) for r in merged] == [
        ("c2d", "sa", "A"),
        ("gemm", "cga", "B"),
    ]
    same = search_efficiency._merge(path, [row("gemm", "cga", "A")], {("gemm", "cga")}, False)
    assert [(r["op"], r["explorer"]) for r in same] == [
        ("gemm", "sa"),
        ("c2d", "sa"),
        ("gemm", "cga"),
    ]
