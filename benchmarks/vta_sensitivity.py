"""How much the ranking of tuned VTA schedules depends on the uncalibrated timing constants.

The constants of ``dla_targets/vta/timing.py`` (:data:`~heronlike.dla_targets.vta.UNCALIBRATED`)
have no board measurement behind them (vta.md §4.3). This script tunes a case with heronlike
(default constants), takes the top-20 distinct schedules by simulated cycles, re-times each under
a grid of altered constants and reports Kendall's τ between the ranking under the altered and the
default constants (1 = same order, 0 = unrelated; scipy's ``kendalltau``, τ-b).

Grid (documented): each uncalibrated constant alone at the low and the high end of its
plausible range (:data:`~heronlike.dla_targets.vta.PLAUSIBLE_RANGES`, about ½× and 2× the
default, r_row 0–32 and d_in 0–8 from vta.md §4.3), plus two corners with every constant low or
every constant high, plus the Chisel profile (``TimingParams.chisel``).

    .venv/bin/python benchmarks/vta_sensitivity.py [--trials 64] [--cases gemm256,c2d5]

Writes ``benchmarks/results/vta_sensitivity.csv`` (one row per case × variant: τ, p-value,
whether the best schedule stays the best, the default and altered best cycles).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import sys
import tempfile
from pathlib import Path

from scipy.stats import kendalltau

from heronlike import ops
from heronlike.dla_targets.vta import PLAUSIBLE_RANGES, UNCALIBRATED, TimingParams, time_program
from heronlike.dla_targets.vta.lowering import GemmParams, gemm_int32_program, load_artifact
from heronlike.dla_targets.vta.runner import VTARunner
from heronlike.host import cpu_model
from heronlike.measure import RunInput, RunResult

S8 = ops.target_dtype("int8", "vta")
CASES = {
    "gemm256": ("gemm", (256, 256, 256)),
    "c2d5": ("c2d", (1, 14, 14, 256, 256, 3, 3, 1, 1, 1)),
    "bmm_b2": ("bmm", (12, 512, 64, 512)),
}
OUT = Path(__file__).parent / "results" / "vta_sensitivity.csv"
TOP = 20


class _RecordingRunner(VTARunner):
    """The timing-only VTA runner, remembering each valid candidate's parameters and cycles."""

    def __init__(self) -> None:
        super().__init__(check=False)
        self.seen: dict[GemmParams, float] = {}

    def run_one(self, inp: RunInput) -> RunResult:
        res = super().run_one(inp)
        if res.latency_s is not None:
            _, params = load_artifact(inp.artifact_path)
            self.seen[params] = res.latency_s * 100e6
        return res


def variants() -> dict[str, TimingParams]:
    """The grid of the module docstring, by name."""
    base = TimingParams.pynq_hls()
    out = {}
    for name in UNCALIBRATED:
        lo, hi = PLAUSIBLE_RANGES[name]
        for tag, v in (("low", lo), ("high", hi)):
            if v != getattr(base, name):
                out[f"{name}={v} ({tag})"] = base.with_(**{name: v})
    out["all low"] = base.with_(**{n: PLAUSIBLE_RANGES[n][0] for n in UNCALIBRATED})
    out["all high"] = base.with_(**{n: PLAUSIBLE_RANGES[n][1] for n in UNCALIBRATED})
    out["chisel profile"] = TimingParams.chisel()
    return out


def top_schedules(case: str, trials: int) -> list[GemmParams]:
    """The ``TOP`` fastest distinct schedules heronlike's tune of ``case`` measured."""
    import heronlike

    op, args = CASES[case]
    runner = _RecordingRunner()
    with tempfile.TemporaryDirectory() as tmp:
        heronlike.tune(
            ops.OPERATORS[op][0](*args, dtype=S8),
            "vta",
            trials=trials,
            batch_size=16,
            seed=0,
            explorer="cga",
            records=str(Path(tmp) / "records.sqlite"),
            work_dir=tmp,
            runner=runner,
            final_repeat=1,
        )
    return sorted(runner.seen, key=runner.seen.__getitem__)[:TOP]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--cases", default="gemm256,c2d5")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    stamp = {"cpu": cpu_model(), "date": datetime.date.today().isoformat()}
    rows = []
    grid = variants()
    for case in args.cases.split(","):
        top = top_schedules(case, args.trials)
        programs = [gemm_int32_program(p) for p in top]
        default = [time_program(pr).cycles for pr in programs]
        for name, timing in grid.items():
            altered = [time_program(pr, timing).cycles for pr in programs]
            tau, pval = kendalltau(default, altered)
            best_d = min(range(len(top)), key=default.__getitem__)
            best_a = min(range(len(top)), key=altered.__getitem__)
            rows.append(
                {
                    "case": case,
                    "variant": name,
                    "n_schedules": len(top),
                    "kendall_tau": round(float(tau), 3),
                    "p_value": f"{pval:.2g}",
                    "best_kept": best_d == best_a,
                    "default_best_cycles": default[best_d],
                    "altered_best_cycles": altered[best_a],
                    "altered_cycles_of_default_best": altered[best_d],
                    "trials": args.trials,
                    **stamp,
                }
            )
            print(rows[-1], flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    taus = [r["kendall_tau"] for r in rows]
    print(
        f"Kendall tau: min {min(taus):.3f}, median {sorted(taus)[len(taus) // 2]:.3f}; "
        f"best kept in {sum(r['best_kept'] for r in rows)}/{len(rows)}; wrote {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
