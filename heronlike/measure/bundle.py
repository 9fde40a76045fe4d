"""Offline measurement bundles: build here, measure on a GPU machine elsewhere, import back.

heronlike tunes CUDA TensorCore kernels on a machine without a GPU. The builder compiles each
candidate into a folder holding ``kernel.cu``, ``kernel.cubin`` and ``manifest.json`` (the
launches: kernel names, grids, blocks, dynamic shared bytes, and parameter indices). A *bundle*
packs such folders with everything a GPU machine needs to check and time them, and nothing it
can recreate: inputs are not shipped (a 4096x4096 fp16 matrix is 32 MiB) but drawn there from a
seed, and the reference is computed there. The GPU machine needs Python >= 3.10, numpy and CuPy
(PyTorch for the baselines), not heronlike nor TVM: the bundle carries its own runner,
``run_bundle.py`` (this package's :mod:`heronlike.measure.run_bundle`, copied in).

Layout::

    BUNDLE/
      bundle.json           # see write_bundle
      run_bundle.py         # python run_bundle.py BUNDLE [--standin] ... -> BUNDLE/results.json
      cands/<id>/kernel.cubin, kernel.cu, manifest.json

The round trip:

1. :func:`write_bundle` (or :class:`BundleRunner`, which does all three steps as a
   :class:`~heronlike.measure.Runner`);
2. copy the folder to the GPU machine and run ``python BUNDLE/run_bundle.py BUNDLE``;
3. copy ``results.json`` back and :func:`import_results` it into a records database
   (``heronlike import-results BUNDLE``), or :func:`read_results` it.

Results made by ``run_bundle.py --standin`` (a CPU stand-in that launches nothing, for tests)
carry ``"standin": true`` and fake latencies; importing them needs ``allow_standin=True``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from heronlike.errors import BundleError
from heronlike.measure import run_bundle as script
from heronlike.measure.kinds import ErrorKind
from heronlike.measure.measurer import Measurement
from heronlike.measure.runner import OnRunResult, RunInput, RunResult, short_error

if TYPE_CHECKING:  # pragma: no cover
    from heronlike.records import Records

__all__ = [
    "BUNDLE_FORMAT",
    "DEFAULT_FLUSH_L2_BYTES",
    "DEFAULT_REPEAT",
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_WARMUP",
    "BundleRunner",
    "ImportSummary",
    "import_results",
    "load_bundle",
    "read_results",
    "write_bundle",
]

BUNDLE_FORMAT = script.BUNDLE_FORMAT
DEFAULT_REPEAT = 20
DEFAULT_WARMUP = 5
DEFAULT_FLUSH_L2_BYTES = 256 << 20
DEFAULT_TIMEOUT_S = 120.0
SCRIPT_NAME = "run_bundle.py"

_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
_OPTIONAL_CANDIDATE_KEYS = ("seed", "explorer", "explore_s", "solve_s")


# ------------------------------------------------------------------------------------------------
# writing


def write_bundle(
    bundle_dir: str | os.PathLike[str],
    workloads: Sequence[Mapping[str, Any]],
    candidates: Sequence[Mapping[str, Any]],
    *,
    repeat: int = DEFAULT_REPEAT,
    warmup: int = DEFAULT_WARMUP,
    flush_l2_bytes: int = DEFAULT_FLUSH_L2_BYTES,
    baselines: bool = True,
    number: int = 1,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    explorer: str = "bundle",
    seed: int | None = None,
    overwrite: bool = False,
) -> Path:
    """Write a bundle folder; return its path.

    Args:
        bundle_dir: the folder to create. It must not exist or be empty, unless ``overwrite``
            and it holds a ``bundle.json`` (then it is replaced).
        workloads: one dict per workload::

                {"workload_key": str, "target_key": str,
                 "params": [{"name", "shape", "dtype", "role": "input"|"output"|"scratch",
                             "logical_shape"}, ...],   # in the kernel's parameter order
                 "reference": {"kind": "einsum", "spec": "mk,nk->mn", "operands": [0, 1],
                               "output": 2}
                            | {"kind": "conv2d_nhwc", "input": 0, "weight": 1, "output": 2,
                               "stride": [sh, sw], "padding": [ph, pw], "dilation": [dh, dw]},
                 "seed": int, "rtol": float, "atol": float,
                 "flop": float (optional), "label": str (optional),
                 "compute_text": str (optional, registered with the records)}

            ``shape`` is the kernel's (possibly padded) shape, ``logical_shape`` (default: the
            same) the computation's: inputs are drawn at the logical shape and zero-padded,
            outputs compared on their logical part. A ``scratch`` parameter is zeroed before
            the checked call and never compared.
        candidates: one dict per candidate::

                {"id": str, "workload_key": str, "artifact_dir": path, "assignment": {var: int},
                 "build_s": float,
                 "manifest": dict (optional: used instead of artifact_dir/manifest.json),
                 "seed", "explorer", "explore_s", "solve_s" (optional, for the trial record)}

            ``artifact_dir`` must hold ``kernel.cubin`` and ``manifest.json`` (unless given);
            ``kernel.cu`` is copied when present (the GPU side recompiles it with nvcc when the
            driver rejects the cubin). Ids are 1-100 characters of letters, digits, ``._-``.
        repeat, warmup, number: timing: ``warmup`` calls, then ``repeat`` measurements of
            ``number`` calls each; the latency is the median of the per-call means.
        flush_l2_bytes: bytes written before each measurement to flush the L2 cache (0: none).
        baselines: time PyTorch on each workload too.
        timeout_s: seconds one candidate may take on the GPU machine before it is killed.
        explorer, seed: the explorer name and tune seed recorded with imported trials (a
            candidate's own ``explorer``/``seed`` wins; the default seed is the workload's).
        overwrite: replace an existing bundle at ``bundle_dir``.

    ``bundle.json`` holds ``format``, ``id`` (a fresh uuid; results name it), ``created`` (ISO
    8601, UTC), ``heronlike_version``, ``explorer``, ``seed``, ``policy`` (repeat, warmup,
    number, flush_l2_bytes, timeout_s, baselines), ``workloads`` (as given, with ``label`` and
    ``logical_shape`` filled in), and ``candidates`` (id, workload_key, assignment, build_s,
    manifest, and the optional keys given).

    Raises:
        BundleError: a malformed workload or candidate, a duplicate key or id, a candidate of
            an unknown workload, a missing ``kernel.cubin``/``manifest.json``, or an occupied
            ``bundle_dir``.
    """
    from heronlike import __version__

    if repeat < 1 or warmup < 0 or number < 1 or flush_l2_bytes < 0 or timeout_s <= 0:
        raise BundleError(
            f"bad timing policy: repeat={repeat}, warmup={warmup}, number={number}, "
            f"flush_l2_bytes={flush_l2_bytes}, timeout_s={timeout_s}"
        )
    wl_out = [_normalise_workload(w) for w in workloads]
    by_key = {w["workload_key"]: w for w in wl_out}
    if len(by_key) != len(wl_out):
        raise BundleError("two workloads have the same workload_key")
    staged: list[tuple[dict[str, Any], Path, dict[str, Any]]] = []
    seen: set[str] = set()
    for cand in candidates:
        entry, src, manifest = _normalise_candidate(cand, by_key)
        if entry["id"] in seen:
            raise BundleError(f"duplicate candidate id {entry['id']!r}")
        seen.add(entry["id"])
        staged.append((entry, src, manifest))

    root = Path(bundle_dir)
    if root.exists() and any(root.iterdir()):
        if not (overwrite and (root / script.BUNDLE_FILE).is_file()):
            raise BundleError(f"{root} exists and is not empty (overwrite=True replaces a bundle)")
        shutil.rmtree(root)
    (root / script.CANDIDATES_DIR).mkdir(parents=True, exist_ok=True)
    entries = []
    for entry, src, manifest in staged:
        dst = root / script.CANDIDATES_DIR / entry["id"]
        dst.mkdir()
        shutil.copyfile(src / script.CUBIN, dst / script.CUBIN)
        if (src / script.SOURCE).is_file():
            shutil.copyfile(src / script.SOURCE, dst / script.SOURCE)
        (dst / script.MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")
        entries.append({**entry, "manifest": manifest})
    shutil.copyfile(Path(script.__file__), root / SCRIPT_NAME)
    bundle = {
        "format": BUNDLE_FORMAT,
        "id": uuid.uuid4().hex,
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
        "heronlike_version": __version__,
        "explorer": explorer,
        "seed": seed,
        "policy": {
            "repeat": int(repeat),
            "warmup": int(warmup),
            "number": int(number),
            "flush_l2_bytes": int(flush_l2_bytes),
            "timeout_s": float(timeout_s),
            "baselines": bool(baselines),
        },
        "workloads": wl_out,
        "candidates": entries,
    }
    (root / script.BUNDLE_FILE).write_text(json.dumps(bundle, indent=1), encoding="utf-8")
    return root


def _normalise_workload(workload: Mapping[str, Any]) -> dict[str, Any]:
    w = json.loads(json.dumps(dict(workload)))  # a JSON-clean deep copy
    problem = script.check_workload(w)
    if problem:
        raise BundleError(f"workload {w.get('workload_key')!r}: {problem}")
    for p in w["params"]:
        p["shape"] = [int(d) for d in p["shape"]]
        p["logical_shape"] = list(script.logical_shape(p))
    w.setdefault("label", w["workload_key"][:16])
    w["seed"] = int(w["seed"])
    w["rtol"] = float(w["rtol"])
    w["atol"] = float(w["atol"])
    return w


def _normalise_candidate(
    cand: Mapping[str, Any], workloads: Mapping[str, dict[str, Any]]
) -> tuple[dict[str, Any], Path, dict[str, Any]]:
    cid = str(cand.get("id", ""))
    if not _ID_RE.match(cid):
        raise BundleError(f"candidate id {cid!r}: use 1-100 letters, digits, '.', '_' or '-'")
    if cand.get("workload_key") not in workloads:
        raise BundleError(f"candidate {cid}: unknown workload_key {cand.get('workload_key')!r}")
    src = Path(cand["artifact_dir"])
    if not (src / script.CUBIN).is_file():
        raise BundleError(f"candidate {cid}: no {script.CUBIN} in {src}")
    manifest = cand.get("manifest")
    if manifest is None:
        try:
            manifest = json.loads((src / script.MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise BundleError(f"candidate {cid}: cannot read {script.MANIFEST}: {exc}") from None
    entry: dict[str, Any] = {
        "id": cid,
        "workload_key": cand["workload_key"],
        "assignment": {str(k): int(v) for k, v in dict(cand.get("assignment", {})).items()},
        "build_s": float(cand.get("build_s", 0.0)),
    }
    for key in _OPTIONAL_CANDIDATE_KEYS:
        if cand.get(key) is not None:
            entry[key] = cand[key]
    return entry, src, json.loads(json.dumps(dict(manifest)))


# ------------------------------------------------------------------------------------------------
# reading


def load_bundle(bundle_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """The parsed ``bundle.json`` of ``bundle_dir``.

    Raises:
        BundleError: no readable bundle of a known format there.
    """
    try:
        return script.load_bundle(bundle_dir)
    except ValueError as exc:
        raise BundleError(str(exc)) from None


def _load_results(
    bundle_dir: str | os.PathLike[str], results_path: str | os.PathLike[str] | None
) -> tuple[dict[str, Any], dict[str, Any], Path]:
    bundle = load_bundle(bundle_dir)
    path = Path(results_path) if results_path else Path(bundle_dir) / script.RESULTS_FILE
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BundleError(f"{path}: cannot read results ({exc})") from None
    if not isinstance(results, dict) or not isinstance(results.get("candidates"), dict):
        raise BundleError(f"{path}: not a run_bundle.py results file")
    if results.get("bundle_id") != bundle.get("id"):
        raise BundleError(
            f"{path} was written for bundle {results.get('bundle_id')}, not for the bundle in "
            f"{bundle_dir} ({bundle.get('id')})"
        )
    return bundle, results, path


def read_results(
    bundle_dir: str | os.PathLike[str], results_path: str | os.PathLike[str] | None = None
) -> list[tuple[dict[str, Any], Measurement]]:
    """``(candidate, measurement)`` for every candidate of the bundle that has a result.

    ``candidate`` is its ``bundle.json`` entry; the :class:`Measurement` carries the result's
    error kind/message, latency (``None`` unless the candidate succeeded), the bundle's
    ``build_s`` and the GPU side's ``run_s``. Stand-in results are returned as they are
    (error kind ``"standin"``). Order: the bundle's.

    Raises:
        BundleError: no bundle, no readable results, or results of another bundle.
    """
    bundle, results, _ = _load_results(bundle_dir, results_path)
    out = []
    for cand in bundle["candidates"]:
        res = results["candidates"].get(cand["id"])
        if res is not None:
            out.append((cand, _measurement(cand, res)))
    return out


def _measurement(cand: Mapping[str, Any], res: Mapping[str, Any]) -> Measurement:
    kind = res.get("error_kind")
    latency = res.get("latency_s") if kind is None else None
    if kind is None and latency is None:
        kind, msg = ErrorKind.RUN, "no latency in the results"
    else:
        msg = res.get("error_msg")
    return Measurement(
        kind,
        msg,
        None if latency is None else float(latency),
        float(cand.get("build_s", 0.0)),
        float(res.get("run_s") or 0.0),
    )


@dataclass
class ImportSummary:
    """What :func:`import_results` did.

    Attributes:
        imported: trials added to the records.
        skipped: candidates whose (workload, target, assignment) the records already held.
        missing: candidates of the bundle without a result (e.g. a ``--candidates`` run).
        failed: error kind -> count, over the imported trials.
        best: workload key -> ``(latency_s, candidate id)`` of the fastest successful result
            in the results file (imported now or earlier).
        labels: workload key -> its label.
        baselines: workload key -> the baseline entry of the results file.
        device, standin, results_path: where the results came from.
    """

    imported: int = 0
    skipped: int = 0
    missing: int = 0
    failed: dict[str, int] = field(default_factory=dict)
    best: dict[str, tuple[float, str]] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    baselines: dict[str, Any] = field(default_factory=dict)
    device: str | None = None
    standin: bool = False
    results_path: Path | None = None


def import_results(
    bundle_dir: str | os.PathLike[str],
    records: Records | str | os.PathLike[str],
    results_path: str | os.PathLike[str] | None = None,
    *,
    allow_standin: bool = False,
    run_id: int | None = None,
) -> ImportSummary:
    """Add one :class:`~heronlike.records.TrialRecord` per result of the bundle to ``records``.

    Each trial gets the candidate's workload and target keys, assignment, latency (``None``
    unless it succeeded), error kind and message, the bundle's ``build_s``, the GPU side's
    ``run_s``, the seed and explorer of the candidate or else of the bundle (default explorer
    ``"bundle"``, default seed the workload's input seed), and the next free trial index
    (:meth:`~heronlike.records.Records.append`). A candidate whose (workload, target, assignment) is
    already recorded is skipped and counted, so importing twice adds nothing the second time.
    Workloads are registered (idempotently) with their label and ``compute_text``.

    Args:
        bundle_dir: the bundle folder.
        records: an open :class:`~heronlike.records.Records`, or a path to open (and close).
        results_path: the results file (default ``bundle_dir/results.json``).
        allow_standin: accept results of ``run_bundle.py --standin`` (their trials get error
            kind ``"standin"``; for tests only).
        run_id: the records run the trials belong to, if any.

    Raises:
        BundleError: no bundle or results, results of another bundle, or stand-in results
            without ``allow_standin``.
    """
    from heronlike.records import Records, TrialRecord

    bundle, results, path = _load_results(bundle_dir, results_path)
    if results.get("standin") and not allow_standin:
        raise BundleError(
            f"{path} holds stand-in results (run_bundle.py --standin launched nothing and "
            "its latencies are fake); run the bundle on a GPU, or pass allow_standin"
        )
    summary = ImportSummary(
        device=results.get("device"), standin=bool(results.get("standin")), results_path=path
    )
    summary.baselines = dict(results.get("baselines") or {})
    workloads = {w["workload_key"]: w for w in bundle["workloads"]}
    summary.labels = {k: str(w.get("label", k)) for k, w in workloads.items()}
    db = records if isinstance(records, Records) else Records(records)
    try:
        known: dict[tuple[str, str], set[str]] = {}
        for cand in bundle["candidates"]:
            res = results["candidates"].get(cand["id"])
            if res is None:
                summary.missing += 1
                continue
            wl = workloads[cand["workload_key"]]
            wk, tk = wl["workload_key"], wl["target_key"]
            m = _measurement(cand, res)
            if m.error_kind is None and m.latency_s is not None:
                if wk not in summary.best or m.latency_s < summary.best[wk][0]:
                    summary.best[wk] = (m.latency_s, cand["id"])
            if (wk, tk) not in known:
                db.register_workload(
                    wk,
                    description=str(wl.get("label", "")),
                    compute_text=str(wl.get("compute_text", "")),
                    target_key=tk,
                )
                known[(wk, tk)] = {assignment_key(r.assignment) for r in db.trials(wk, tk)}
            akey = assignment_key(cand["assignment"])
            if akey in known[(wk, tk)]:
                summary.skipped += 1
                continue
            db.append(
                TrialRecord(
                    workload_key=wk,
                    target_key=tk,
                    assignment=dict(cand["assignment"]),
                    latency_s=m.latency_s,
                    error_kind=m.error_kind,
                    error_msg=m.error_msg,
                    explore_s=float(cand.get("explore_s", 0.0)),
                    solve_s=float(cand.get("solve_s", 0.0)),
                    build_s=m.build_s,
                    run_s=m.run_s,
                    seed=int(_first(cand.get("seed"), bundle.get("seed"), wl["seed"])),
                    explorer=str(_first(cand.get("explorer"), bundle.get("explorer"), "bundle")),
                    trial_index=-1,  # allocated by append
                ),
                run_id=run_id,
            )
            known[(wk, tk)].add(akey)
            summary.imported += 1
            if m.error_kind is not None:
                summary.failed[m.error_kind] = summary.failed.get(m.error_kind, 0) + 1
    finally:
        if db is not records:
            db.close()
    return summary


def _first(*values: Any) -> Any:
    return next(v for v in values if v is not None)


def assignment_key(assignment: Mapping[str, Any]) -> str:
    """A canonical text of an assignment (sorted JSON of ints): the identity of a candidate
    across bundles and records."""
    return json.dumps({str(k): int(v) for k, v in assignment.items()}, sort_keys=True)


# ------------------------------------------------------------------------------------------------
# a Runner that goes through a bundle


class BundleRunner:
    """A :class:`~heronlike.measure.Runner` that measures through a bundle, synchronously.

    :meth:`run` writes the inputs as a bundle under ``work_dir`` (``bundle_0000``,
    ``bundle_0001``, ...), runs ``command + [bundle_dir]`` as a subprocess, waits for it, reads
    ``bundle_dir/results.json`` and returns one :class:`RunResult` per input, in order. The
    default command is ``[sys.executable, bundle_dir/run_bundle.py]``: the GPU is local. Any
    command that leaves ``results.json`` in the bundle folder works, e.g. a wrapper that copies
    the folder to a GPU host, runs ``ssh gpu-host python3 BUNDLE/run_bundle.py BUNDLE`` and
    copies ``results.json`` back; ``[sys.executable, script, "--standin"]`` gives a stand-in.

    Each :class:`RunInput` maps to a candidate: ``artifact_path`` is the builder's candidate
    folder (``kernel.cubin``, ``kernel.cu``, ``manifest.json``), ``info`` its manifest
    (used when it has ``launches``, else ``manifest.json`` is read) and ``workload`` the
    workload it computes (see :func:`write_bundle`; the tune loop passes it with every
    candidate, :attr:`RunInput.workload`), else the runner's own ``workload``. Inputs of
    several workloads go into one bundle. ``args_path``, ``expected_path``, ``rtol`` and
    ``device`` are not used: the GPU side draws the inputs from ``workload["seed"]``, computes
    the reference and checks with the workload's rtol/atol.

    Never raises for a bad candidate: a missing artifact or workload, a malformed workload, a
    command that fails or times out, or a result that is missing become ``RunResult``s with
    error kind ``"run"``.

    Args:
        work_dir: where the bundles are written (kept unless ``keep=False``).
        command: the command prefix; ``None`` runs the bundled script with this Python.
        workload: the workload dict of inputs that carry none (see :func:`write_bundle`);
            ``None``: every input must carry its own.
        number, repeat, warmup, flush_l2_bytes, timeout_s: the timing policy.
        baselines: also time PyTorch (off by default: a tune does not need it every batch).
        command_timeout_s: wall-clock limit of the whole command; ``None``: none.
        keep: keep each bundle folder after reading its results.
        script_args: options of the bundled ``run_bundle.py`` when ``command`` is ``None``
            (e.g. ``["--standin"]``); the bundle folder comes after them.

    Raises:
        BundleError: a malformed ``workload``.
    """

    def __init__(
        self,
        work_dir: str | os.PathLike[str],
        command: Sequence[str] | None = None,
        workload: Mapping[str, Any] | None = None,
        *,
        number: int = 1,
        repeat: int = DEFAULT_REPEAT,
        warmup: int = DEFAULT_WARMUP,
        flush_l2_bytes: int = DEFAULT_FLUSH_L2_BYTES,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        baselines: bool = False,
        command_timeout_s: float | None = None,
        keep: bool = True,
        script_args: Sequence[str] = (),
    ) -> None:
        self.work_dir = Path(work_dir)
        self.command = list(command) if command is not None else None
        self.workload = _normalise_workload(workload) if workload is not None else None
        self.number = int(number)
        self.repeat = int(repeat)
        self.warmup = int(warmup)
        self.flush_l2_bytes = int(flush_l2_bytes)
        self.timeout_s = float(timeout_s)
        self.baselines = bool(baselines)
        self.command_timeout_s = command_timeout_s
        self.keep = keep
        self.script_args = [str(a) for a in script_args]
        self._batch = 0
        self.last_bundle: Path | None = None
        self.last_output: str = ""

    def _next_dir(self) -> Path:
        while True:
            path = self.work_dir / f"bundle_{self._batch:04d}"
            self._batch += 1
            if not path.exists():
                return path

    def run(
        self, inputs: Sequence[RunInput], on_result: OnRunResult | None = None
    ) -> list[RunResult]:
        """Measure ``inputs`` through one bundle; one :class:`RunResult` per input, in order.
        The bundle runs as a whole, so ``on_result`` hears of every input at the end."""
        results: list[RunResult | None] = [None] * len(inputs)
        cands = []
        ids: dict[int, str] = {}
        workloads: dict[str, dict[str, Any]] = {}
        for i, inp in enumerate(inputs):
            folder = Path(inp.artifact_path)
            if not (folder / script.CUBIN).is_file():
                results[i] = _failed(f"no {script.CUBIN} in {folder}")
                continue
            manifest = dict(inp.info) if "launches" in inp.info else None
            if manifest is None and not (folder / script.MANIFEST).is_file():
                results[i] = _failed(f"no manifest: neither run info nor {folder}/manifest.json")
                continue
            workload, why = self._workload_of(inp, workloads)
            if workload is None:
                results[i] = _failed(why)
                continue
            ids[i] = f"c{i:04d}"
            cands.append(
                {
                    "id": ids[i],
                    "workload_key": workload["workload_key"],
                    "artifact_dir": str(folder),
                    "assignment": {},
                    "build_s": 0.0,
                    "manifest": manifest,
                }
            )
        if cands:
            self._run_bundle(list(workloads.values()), cands, ids, results)
        out = [r if r is not None else _failed("no result") for r in results]
        for i, r in enumerate(out if on_result is not None else ()):
            on_result(i, r)  # type: ignore[misc]
        return out

    def _workload_of(
        self, inp: RunInput, seen: dict[str, dict[str, Any]]
    ) -> tuple[dict[str, Any] | None, str]:
        """The normalised workload of ``inp`` (added to ``seen`` by key), or ``(None, why)``."""
        given = inp.workload
        if given is None:
            if self.workload is None:
                return None, (
                    "no workload: the input carries none (RunInput.workload) and the "
                    "BundleRunner was given none"
                )
            workload = self.workload
        else:
            try:
                workload = _normalise_workload(given)
            except BundleError as exc:
                return None, str(exc)
        key = workload["workload_key"]
        if key in seen and seen[key] != workload:
            return None, f"two different workloads with the key {key} in one batch"
        seen[key] = workload
        return workload, ""

    def _run_bundle(
        self,
        workloads: list[dict[str, Any]],
        cands: list[dict[str, Any]],
        ids: dict[int, str],
        out: list[RunResult | None],
    ) -> None:
        t0 = time.perf_counter()
        try:
            bundle_dir = write_bundle(
                self._next_dir(),
                workloads,
                cands,
                repeat=self.repeat,
                warmup=self.warmup,
                number=self.number,
                flush_l2_bytes=self.flush_l2_bytes,
                timeout_s=self.timeout_s,
                baselines=self.baselines,
            )
        except (BundleError, OSError) as exc:
            for i in ids:
                out[i] = _failed(f"cannot write the bundle: {short_error(exc)}")
            return
        self.last_bundle = bundle_dir
        if self.command is None:
            cmd = [sys.executable, str(bundle_dir / SCRIPT_NAME), *self.script_args]
        else:
            cmd = list(self.command)
        cmd.append(str(bundle_dir))
        failure: str | None = None
        try:
            proc = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=self.command_timeout_s,
            )
            self.last_output = (proc.stdout or "") + (proc.stderr or "")
            if proc.returncode != 0:
                tail = " | ".join(self.last_output.strip().splitlines()[-4:])
                failure = f"{cmd[0]} exited with status {proc.returncode}: {tail[-500:]}"
        except subprocess.TimeoutExpired:
            failure = f"the bundle command exceeded {self.command_timeout_s:g} s"
        except OSError as exc:
            failure = f"cannot run {cmd[0]}: {exc}"
        measured: dict[str, Measurement] = {}
        raw: dict[str, Any] = {}
        if failure is None:
            try:
                measured = {c["id"]: m for c, m in read_results(bundle_dir)}
                raw = _load_results(bundle_dir, None)[1]["candidates"]
            except BundleError as exc:
                failure = str(exc)
        wall = time.perf_counter() - t0
        for i, cid in ids.items():
            m = measured.get(cid)
            if m is None:
                out[i] = _failed(failure or f"no result for candidate {cid}", wall / len(ids))
            else:
                lats = _latencies(raw.get(cid)) if m.error_kind is None else ()
                out[i] = RunResult(m.latency_s, lats, m.error_kind, m.error_msg, m.run_s)
        if not self.keep:
            shutil.rmtree(bundle_dir, ignore_errors=True)

    def close(self) -> None:
        """Nothing to release: every run's subprocess has ended."""

    def __enter__(self) -> BundleRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _latencies(res: Mapping[str, Any] | None) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in (res or {}).get("latencies_s") or ())
    except (TypeError, ValueError):
        return ()


def _failed(msg: str, run_s: float = 0.0) -> RunResult:
    return RunResult(None, (), ErrorKind.RUN, msg, run_s)
