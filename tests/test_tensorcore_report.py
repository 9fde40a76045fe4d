"""``benchmarks/tensorcore.py finish`` and ``report``: which candidates are re-timed, and which
GPU run a report row takes its numbers from.

The bundles and results here are written by hand (no GPU, no nvcc): the logic under test is the
selection and bookkeeping, not the measurement (``run_bundle.py``'s own tests cover that).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import tensorcore as tc  # noqa: E402
from heronlike.dag import ComputeDAG  # noqa: E402
from heronlike.offline import workload_entry  # noqa: E402
from heronlike.records import Records, TrialRecord  # noqa: E402
from heronlike.space import generate_space  # noqa: E402

TARGET = tc.target_string("sm_90")


def _write(folder: Path, name: str, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(data))


def _bundle(folder: Path, entry: dict, assignments: list[dict], explorer: str) -> list[str]:
    ids = [f"c{i:05d}" for i in range(len(assignments))]
    cands = [
        {"id": cid, "workload_key": entry["workload_key"], "assignment": a}
        for cid, a in zip(ids, assignments, strict=True)
    ]
    bundle = {"format": 1, "id": folder.name, "explorer": explorer, "policy": {"repeat": 20}}
    _write(folder, "bundle.json", {**bundle, "workloads": [entry], "candidates": cands})
    return ids


def _results(folder: Path, wk: str, latencies: dict[str, float], base: float, date: str) -> None:
    variant = {"name": "torch.mm(out_dtype=float32)", "latency_s": 2 * base, "correct": True}
    _write(
        folder,
        "results.json",
        {
            "format": 1,
            "standin": False,
            "bundle_id": folder.name,
            "device": "NVIDIA H100 80GB HBM3",
            "compute_capability": "9.0",
            "driver": "580",
            "date": date,
            "policy": {"repeat": 100, "warmup": 20, "flush_l2_bytes": 1 << 28},
            "candidates": {
                cid: {"workload_key": wk, "latency_s": lat, "max_abs_err": 1e-4}
                for cid, lat in latencies.items()
            },
            "baselines": {
                wk: {
                    "name": "torch.matmul",
                    "latency_s": base,
                    "correct": True,
                    "torch": "2.11",
                    "variants": [variant],
                }  # fmt: skip
            },
        },
    )


def test_finish_picks_the_recorded_best_and_report_prefers_the_finish_run(tmp_path: Path) -> None:
    _, _, compute = tc.case_compute("G1")
    space = generate_space(compute, TARGET)
    entry = workload_entry(space, seed=0)
    wk, tk = entry["workload_key"], space.target.key
    assert wk == ComputeDAG.from_compute(compute).workload_key
    assignments = [{"x": i, "C.stages": i, "C.split_k": 2} for i in range(4)]
    search = tmp_path / "bundles" / "G1" / "round000"
    ids = _bundle(search, entry, assignments, "random")
    latencies = [4e-5, 1e-5, 3e-5, 2e-5]  # recorded search medians: c00001 < c00003 < c00002
    with Records(tmp_path / "r.sqlite") as db:
        for i, (a, lat) in enumerate(zip(assignments, latencies, strict=True)):
            db.add(TrialRecord(wk, tk, a, lat, None, None, 0, 0, 0, 0, 0, "random", i))
        db.add(TrialRecord(wk, tk, {"x": 9}, None, "run", "boom", 0, 0, 0, 0, 0, "random", 4))
        index = tc.candidate_index(tmp_path / "bundles")
        picked = tc.finish_candidates(db, wk, tk, index, top=2)
        assert [cand["id"] for _, cand in picked] == ["c00001", "c00003"]
        assert all(folder == search for folder, _ in picked)

        # a search run (newer) and a finish run (older): the report takes the finish run whole
        _results(search, wk, dict(zip(ids, latencies, strict=True)), 5e-6, "2026-11-23T07")
        finish = tmp_path / "bundles" / "finish_1"
        fids = _bundle(finish, entry, [assignments[1], assignments[3]], tc.FINISH_EXPLORER)
        _results(finish, wk, {fids[0]: 1.5e-5, fids[1]: 1.2e-5}, 6e-6, "2026-11-23T06")
        assert tc.candidate_index(tmp_path / "bundles").keys() == index.keys()
        runs = tc.gpu_runs(tmp_path / "bundles")
        assert runs[wk]["finish"] and runs[wk]["path"] == finish
        row = tc.report_row("G1", db, tk, runs)
    assert row["source"] == "finish" and row["status"] == "ok"
    assert row["trials"] == 5 and row["valid"] == 4
    assert row["search_best_ms"] == 0.01  # the records' minimum
    assert row["heronlike_ms"] == 0.012  # the re-timed minimum, not the search's
    assert row["baseline_ms"] == 0.006 and row["ratio"] == 0.5
    # peers get every advantage: the fastest baseline of both runs, beside the same-run ratio
    assert row["baseline_fastest_ms"] == 0.005 and row["baseline_runs"] == 2
    assert row["ratio_fastest"] == 0.417
    assert row["ratio_fp32out"] == 1.0 and row["baseline_fp32out_ms"] == 0.012
    assert row["repeat"] == 100 and row["rtol"] == entry["rtol"] and row["atol"] == entry["atol"]
    assert row["program"] == "wmma, 3 stages, split-K 2"  # the re-timed best's knobs


def test_report_without_a_finish_run_uses_the_records_best(tmp_path: Path) -> None:
    _, _, compute = tc.case_compute("G3")
    space = generate_space(compute, TARGET)
    entry = workload_entry(space, seed=0)
    wk, tk = entry["workload_key"], space.target.key
    search = tmp_path / "G3" / "round000"
    ids = _bundle(search, entry, [{"x": 0}, {"x": 1}], "random")
    _results(search, wk, dict(zip(ids, [3e-5, 2e-5], strict=True)), 1e-5, "2026-11-23T06")
    with Records(tmp_path / "r.sqlite") as db:
        for i, lat in enumerate([3e-5, 2e-5]):
            db.add(TrialRecord(wk, tk, {"x": i}, lat, None, None, 0, 0, 0, 0, 0, "random", i))
        row = tc.report_row("G3", db, tk, tc.gpu_runs(tmp_path))
    assert row["source"] == "search" and row["heronlike_ms"] == row["search_best_ms"] == 0.02
    assert row["ratio"] == 0.5
