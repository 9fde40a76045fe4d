"""Tuning round by round through offline bundles, for a GPU machine without TVM or network.

One call of :func:`prepare_bundle` (``heronlike tune … --bundle DIR``) is one round of the tune
loop up to measurement: the explorer, with its cost model trained on every trial already in the
records, proposes a batch; the target's builder compiles it here (nvcc, no GPU); candidates that
fail to build are recorded at once as failed trials; the rest are written to ``DIR`` as a bundle
(:mod:`heronlike.measure.bundle`). On the GPU machine ``python DIR/run_bundle.py DIR`` checks and
times them and writes ``DIR/results.json``; back here ``heronlike import-results DIR`` adds
them to the records. The next ``--bundle`` round resumes from the records as any tune does.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tvm

from .errors import BundleError
from .explore import search_for
from .measure import BuildInput
from .measure.bundle import write_bundle
from .records import Records, TrialRecord
from .reference import reference_spec, tolerance
from .space import Space, generate_space
from .target import DLATarget


@dataclass(frozen=True)
class BundleRound:
    """What :func:`prepare_bundle` did.

    Attributes:
        bundle: the bundle folder, or None when no candidate built (or none was left).
        candidates: candidates written to the bundle (to be measured on the GPU).
        build_failures: candidates recorded as failed trials (nvcc error, spill, ...).
        trials: trials of this workload and target in the records before the round.
        workload_key, target_key: the records keys.
        records: the records database path.
    """

    bundle: Path | None
    candidates: int
    build_failures: int
    trials: int
    workload_key: str
    target_key: str
    records: Path

    def summary(self) -> str:
        where = f"bundle {self.bundle}" if self.bundle else "no bundle written"
        return (
            f"workload {self.workload_key} on {self.target_key}: {self.trials} trials in "
            f"{self.records}; this round: {self.candidates} candidates to measure, "
            f"{self.build_failures} failed to build; {where}"
        )


def workload_entry(space: Space, seed: int) -> dict[str, Any]:
    """The bundle's description of ``space``'s workload: kernel parameters (padded shapes)
    with their logical shapes and roles, the reference, the input seed and tolerances.

    Raises:
        BundleError: when the compute is not one a bundle can check (no einsum reference).
    """
    dag = space.logical
    reference = reference_spec(dag)
    if reference is None:
        raise BundleError(
            "an offline bundle computes its reference without TVM and knows einsum-like "
            "computes (GEMM, BMM, GEMV); this compute is not one"
        )
    rtol, atol = tolerance(dag)
    params = []
    for logical, kparam in zip(dag.params, space.template.func.params, strict=True):
        params.append(
            {
                "name": logical.name,
                "shape": [int(d) for d in kparam.shape],
                "logical_shape": [int(d) for d in logical.shape],
                "dtype": logical.dtype,
                "role": "output" if logical.name in dag.outputs else "input",
            }
        )
    return {
        "workload_key": space.workload_key,
        "target_key": space.target.key,
        "params": params,
        "reference": reference,
        "seed": int(seed),
        "rtol": rtol,
        "atol": atol,
        "flop": space.logical.flop(),
        "label": dag.describe().splitlines()[-1][:120],
        "compute_text": dag.text,
    }


def prepare_bundle(
    compute: Any,
    target: str | Mapping[str, Any] | DLATarget,
    bundle_dir: str | Path,
    *,
    batch_size: int = 32,
    trials: int | None = None,
    explorer: str = "random",
    explorer_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    records: str | Path | Records | None = None,
    build_timeout_s: float = 120.0,
    repeat: int = 20,
) -> BundleRound:
    """Run one round of the tune loop up to measurement and write it as an offline bundle.

    Args:
        compute, target, explorer, explorer_options, seed, records: as :func:`heronlike.tune`
            (``records`` defaults to ``heronlike_runs/records.sqlite``).
        bundle_dir: the folder to create (must not exist or be empty).
        batch_size: candidates proposed this round (Heron measures 32 per round on GPUs).
        trials: total budget: the round proposes at most ``trials`` minus the trials already
            recorded (none when it is spent); None for no limit.
        build_timeout_s: seconds per candidate build (nvcc included).
        repeat: timed repeats per candidate on the GPU machine.

    Returns:
        A :class:`BundleRound`; its ``bundle`` is None when nothing is left to measure.

    Raises:
        BundleError: the compute has no reference a bundle can compute.
        HostFeatureError: nvcc is missing or rejects the arch. Other typed errors as
            :func:`heronlike.tune`.
    """
    from .session import DEFAULT_RECORDS, _replay_history

    if batch_size < 1:
        raise ValueError(f"batch_size must be >= 1, got {batch_size}")
    space = generate_space(compute, target)
    tgt = space.target
    tgt.check_host()
    entry = workload_entry(space, seed)
    sampler, exp = search_for(space, explorer, seed, options=explorer_options)
    db = records if isinstance(records, Records) else Records(records or DEFAULT_RECORDS)
    try:
        wk, tk = space.workload_key, tgt.key
        db.register_workload(
            wk, description=space.logical.describe(), compute_text=space.logical.text, target_key=tk
        )
        history = db.trials(wk, tk)
        measured = _replay_history(history, sampler, exp, space.logical.flop())
        n = batch_size if trials is None else min(batch_size, trials - len(history))
        t0 = time.perf_counter()
        proposals = exp.propose(n, exclude=measured) if n > 0 else []
        explore_s = (time.perf_counter() - t0) / max(1, len(proposals))
        work = Path(bundle_dir)
        builder = tgt.make_builder(timeout_s=build_timeout_s)
        candidates: list[dict[str, Any]] = []
        failures = 0
        try:
            built = _build(space, proposals, builder)
            for i, (assignment, res) in enumerate(zip(proposals, built, strict=True)):
                if not res.ok:
                    failures += 1
                    db.append(
                        TrialRecord(
                            workload_key=wk,
                            target_key=tk,
                            assignment=assignment,
                            latency_s=None,
                            error_kind=res.error_kind,
                            error_msg=res.error_msg,
                            explore_s=explore_s,
                            solve_s=0.0,
                            build_s=res.build_s,
                            run_s=0.0,
                            seed=seed,
                            explorer=exp.name,
                            trial_index=-1,  # allocated by append
                        )
                    )
                    continue
                candidates.append(
                    _candidate(f"c{len(history) + i:05d}", wk, assignment, res, seed, exp.name)
                    | {"explore_s": explore_s}
                )
            path = None
            if candidates:
                path = write_bundle(work, [entry], candidates, repeat=repeat, seed=seed)
        finally:
            builder.close()
        return BundleRound(path, len(candidates), failures, len(history), wk, tk, db.path)
    finally:
        if not isinstance(records, Records):
            db.close()


def _build(space: Space, assignments: list[dict[str, int]], builder: Any) -> list[Any]:
    """Schedule every assignment of ``space`` and build it with ``builder`` (BuildResults)."""
    tgt = space.target
    inputs = [
        BuildInput(tvm.ir.save_json(space.program(a)), tgt.tvm_target(), tgt.build_options())
        for a in assignments
    ]
    return builder.build(inputs)


def _candidate(
    cid: str, workload_key: str, assignment: Mapping[str, int], res: Any, seed: int, explorer: str
) -> dict[str, Any]:
    """A bundle candidate entry of one successful build."""
    return {
        "id": cid,
        "workload_key": workload_key,
        "artifact_dir": res.artifact_path,
        "assignment": dict(assignment),
        "build_s": res.build_s,
        "manifest": dict(res.info),
        "seed": seed,
        "explorer": explorer,
    }


def bundle_assignments(
    compute: Any,
    target: str | Mapping[str, Any] | DLATarget,
    bundle_dir: str | Path,
    assignments: Mapping[str, Mapping[str, int]],
    *,
    seed: int = 0,
    repeat: int = 20,
    warmup: int = 5,
    build_timeout_s: float = 120.0,
) -> tuple[Path | None, dict[str, str]]:
    """Build given assignments of ``compute``'s space and write them as one bundle, with no
    explorer and no records: e.g. the best programs several simulated searches found, to be
    re-measured side by side on the GPU.

    Args:
        assignments: candidate id (letters, digits, ``_``, ``-``) -> a full valid assignment.
        seed: the input seed of the bundle's workload.
        repeat, warmup: the timing policy on the GPU machine.

    Returns:
        ``(bundle folder or None when nothing built, {id: why it is not in the bundle})``: an
        assignment that violates the space's CSP is not built; a build failure is reported.

    Raises:
        BundleError: the compute has no reference a bundle can compute.
        HostFeatureError: nvcc is missing or rejects the arch.
    """
    space = generate_space(compute, target)
    space.target.check_host()
    entry = workload_entry(space, seed)
    failed: dict[str, str] = {}
    for cid, a in assignments.items():
        misfits = space.misfits(a)
        if misfits:
            failed[cid] = "not a valid assignment of this space: " + "; ".join(misfits[:3])
    ids = [cid for cid in assignments if cid not in failed]
    proposals = [space.fit(assignments[i]) or {} for i in ids]  # each completed in this space
    builder = space.target.make_builder(timeout_s=build_timeout_s)
    try:
        built = _build(space, proposals, builder)
        failed |= {i: f"{r.error_kind}: {r.error_msg}" for i, r in zip(ids, built) if not r.ok}
        candidates = [
            _candidate(i, space.workload_key, a, r, seed, "given")
            for i, a, r in zip(ids, proposals, built, strict=True)
            if r.ok
        ]
        path = None
        if candidates:
            path = write_bundle(
                bundle_dir, [entry], candidates, repeat=repeat, warmup=warmup, seed=seed
            )
        return path, failed
    finally:
        builder.close()
