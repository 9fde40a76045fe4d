"""What a target option buys: tunes with and without it, re-timed side by side (issue 25).

For each case and seed, two tunes of the same compute with the same seed, explorer, budget and
prior, one after the other in this process: ``base`` on this CPU's target as the suite builds
it (``dlboost``), ``option`` on that target plus ``--options`` (default ``-accumulators=auto``:
a register tile of at least the latency-hiding count of accumulators,
:class:`heronlike.rules.latency.HideLatency`); the arm that runs first alternates with the
seed. Both picks are then timed by the suite's
harness (:func:`benchmarks.suite.time_programs`: fresh processes, outputs checked, the order
rotated each round). Per row:

* ``*_first_ms``: the best tuning-time latency after the first round;
* ``*_final_ms``: the harness's median of the kernel the tune returned;
* ``*_trials_to_95``: trials until the tune's best reached 95 % of its final tuning-time best;
* ``*_accumulators``: the picked register tile's ``vpdpbusd`` accumulators (its register
  bytes less the reserve, in 64-byte registers; the largest over the program's stages);
* ``*_guards``: where the pick guards the padding taps, where the space has the
  ``skip_padding`` knob (``-all-guards``);
* ``*_widened_copy``: where the pick writes A's int16 copy (``root`` or ``task``), where the
  space has the ``widened_copy`` knob (``-widen-a=root`` has none);
* ``speedup``: ``base_final_ms / option_final_ms`` (> 1: the tune with the option found the
  faster kernel);
* ``far_turn_share``, ``*_near_ms`` / ``*_far_ms``, ``speedup_near`` / ``_far``: the same split
  by the distance between the two cores in each turn of the harness (the round trip probed
  before it; far above twice the lowest of the run, :func:`benchmarks.suite.state_medians`).

    python benchmarks/target_options.py --cases G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1
    python benchmarks/target_options.py --cases G1 --seeds 1 --trials 8      # a quick look
    python benchmarks/target_options.py --options=-all-guards=0.2 --cases C3D3,C3D1,C2D5,D5,T5
    python benchmarks/target_options.py --options=-widen-a=root --cases B4,B1,G1,C1D1,C2D6,D4

Writes ``benchmarks/results/target_options-<cpu>-<date>.csv`` and prints the geomeans.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from benchmarks import suite  # noqa: E402
from benchmarks.prior_effect import tune_arm  # noqa: E402
from heronlike.dla_targets.dlboost import RESERVED_REGISTERS, VECTOR_BYTES  # noqa: E402
from heronlike.host import cpu_model, machine_stamp  # noqa: E402
from heronlike.postproc import GUARD_PLACES  # noqa: E402

#: the Xeon's rows lost to PyTorch at 16 trials (docs/results.md) and two it wins
DEFAULT_CASES = ("G1", "C1D5", "C3D1", "C3D3", "B1", "D1")


def _ms(seconds: float | None) -> float | None:
    return seconds * 1e3 if seconds else None


def accumulators(assignment: dict[str, int]) -> int | None:
    """The register tile's accumulators of a DL Boost program: its ``<stage>.register.bytes``
    less the reserve, in vector registers (the largest over its stages; None without one)."""
    tiles = [v for k, v in assignment.items() if k.endswith(".register.bytes")]
    if not tiles:
        return None
    return (max(tiles) - RESERVED_REGISTERS * VECTOR_BYTES) // VECTOR_BYTES


def _picked(assignment: dict[str, int], suffix: str, places: Sequence[str]) -> str:
    """The places a program's ``<stage><suffix>`` knobs pick (``places[value]``), comma
    separated; "" where the space has no such knob."""
    return ",".join(places[v] for k, v in assignment.items() if k.endswith(suffix))


def guards(assignment: dict[str, int]) -> str:
    """Where the picked program guards the padding taps: the ``<stage>.skip_padding`` knob's
    place (:data:`heronlike.postproc.GUARD_PLACES`); "" where the space has no such knob."""
    return _picked(assignment, ".skip_padding", GUARD_PLACES)


def widened_copy(assignment: dict[str, int]) -> str:
    """Where the picked program writes A's widened copy: ``root`` or ``task`` (in the stage's
    parallel loop) by the ``<stage>.widened_copy`` knob
    (:class:`heronlike.rules.widen.PlaceWidenedCopy`); "" where the space has no such knob."""
    return _picked(assignment, ".widened_copy", ("root", "task"))


def core_states(
    turns: dict[str, list[tuple[float, float]]], a: argparse.Namespace, seed: int
) -> dict[str, float | None]:
    """The side-by-side's columns for the distance between the cores
    (:func:`benchmarks.suite.add_core_state_columns` alike): ``far_turn_share``,
    ``option_near_ms`` / ``_far_ms``, ``base_near_ms`` / ``_far_ms`` and ``speedup_near`` /
    ``_far`` (``base / option``), far meaning a round trip above twice the lowest of the run
    so far (``a.round_trip_ref``, lowered by these turns); empty where nothing was probed."""
    trips = [t for pairs in turns.values() for t, _ in pairs]
    if not trips:
        return {}
    a.round_trip_ref, share = suite.turn_reference(trips, a.round_trip_ref)
    out: dict[str, float | None] = {"far_turn_share": share}
    for arm in ("option", "base"):
        near_s, far_s = suite.state_medians(turns.get(f"{arm}-{seed}", []), a.round_trip_ref)
        out[f"{arm}_near_ms"], out[f"{arm}_far_ms"] = _ms(near_s), _ms(far_s)
    for state in ("near", "far"):
        b, o = out[f"base_{state}_ms"], out[f"option_{state}_ms"]
        out[f"speedup_{state}"] = b / o if b and o else None
    return out


def one_case(spec: str, a: argparse.Namespace, mode, work: Path) -> list[dict]:
    case = suite.case_compute(spec, "int8", mode)
    targets = {"option": f"{mode.target} {a.options}", "base": mode.target}
    rows = []
    for seed in range(a.seeds):
        arms = {}
        for arm in tuple(targets) if seed % 2 == 0 else tuple(reversed(targets)):
            folder = work / f"{arm}-{seed}"
            folder.mkdir(exist_ok=True)
            arms[arm] = tune_arm(case.compute, targets[arm], a, seed, True, folder)
        (opt, opt_first, opt_95), (base, base_first, base_95) = arms["option"], arms["base"]
        programs = {
            f"option-{seed}": opt.space.program(opt.assignment),
            f"base-{seed}": base.space.program(base.assignment),
        }
        turns: dict[str, list[tuple[float, float]]] = {}
        timed = suite.time_programs(programs, base.space, a.rounds, work, turns=turns)
        opt_ms, base_ms = _ms(timed[f"option-{seed}"]), _ms(timed[f"base-{seed}"])
        states = core_states(turns, a, seed)
        row = dict(
            case=case.name,
            op=case.op,
            shape_run=suite._params_text(case.params),
            target=base.target_key,
            options=a.options,
            explorer=a.explorer,
            trials=a.trials,
            batch=a.batch,
            seed=seed,
            option_first_ms=_ms(opt_first),
            base_first_ms=_ms(base_first),
            option_final_ms=opt_ms,
            base_final_ms=base_ms,
            speedup=base_ms / opt_ms if opt_ms and base_ms else None,
            first_round_speedup=base_first / opt_first if opt_first and base_first else None,
            option_trials_to_95=opt_95,
            base_trials_to_95=base_95,
            option_accumulators=accumulators(opt.assignment),
            base_accumulators=accumulators(base.assignment),
            option_guards=guards(opt.assignment),
            base_guards=guards(base.assignment),
            option_widened_copy=widened_copy(opt.assignment),
            base_widened_copy=widened_copy(base.assignment),
            **states,
            rounds=a.rounds,
            threads=opt.space.target.cores,
            **machine_stamp(),
        )
        rows.append(row)
        print(
            f"[{case.name} seed {seed}] first round {row['option_first_ms']:.4f} vs "
            f"{row['base_first_ms']:.4f} ms; final {opt_ms:.4f} vs {base_ms:.4f} ms "
            f"(with vs without {a.options}): {row['speedup']:.3f}x; accumulators "
            f"{row['option_accumulators']} vs {row['base_accumulators']}",
            flush=True,
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    p = suite.per_case_parser(__doc__, DEFAULT_CASES)
    p.add_argument("--options", default="-accumulators=auto", help="the option arm's options")
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--explorer", default="cga")
    p.add_argument("--rounds", type=int, default=3, help="harness rounds of the side-by-side")
    a = p.parse_args(argv)
    a.baseline_prior = None  # tune_arm's: both arms rank their first round by the target's prior
    a.model_alone = False  # and rank later rounds by the model with the prior as its margin
    a.round_trip_ref = suite.lowest_round_trip([])  # the near state's round trip, for the labels
    rows, path = suite.run_per_case(a, one_case, "target_options")
    if path is None:
        return 1
    final = [r["speedup"] for r in rows if r["speedup"]]
    first = [r["first_round_speedup"] for r in rows if r["first_round_speedup"]]
    print(f"\n{len(rows)} tunes per arm ({cpu_model()}, {a.trials} trials, {a.explorer}):")
    print(f"  first round, with vs without {a.options}: geomean {suite.geomean(first):.3f}x")
    print(
        f"  final kernel, with vs without {a.options}: geomean {suite.geomean(final):.3f}x "
        f"(better on {sum(s > 1 for s in final)}, worse on {sum(s < 1 for s in final)})"
    )
    for state in ("near", "far"):
        got = [r[f"speedup_{state}"] for r in rows if r.get(f"speedup_{state}")]
        if got:
            print(f"  in {state} turns: geomean {suite.geomean(got):.3f}x over {len(got)} tunes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
