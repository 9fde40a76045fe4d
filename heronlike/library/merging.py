"""Merge records databases from several machines into one.

Each source's runs (with their versions) and trials are copied; trial indices are renumbered
after those already in the output for the same workload and target (so nothing collides),
and a trial already present (same workload, target, assignment, latency and time recorded) is
skipped, so merging the same file twice adds nothing. Which trials a later build reuses is
decided then, as always, by target key and heronlike/TVM version.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InvalidArgumentError, RecordsMismatchError
from ..records import Records, TrialRecord, _row_to_record

__all__ = ["MergeSummary", "merge"]

_COLUMNS = (
    "workload_key, target_key, assignment_json, latency_s, error_kind, error_msg, explore_s, "
    "solve_s, build_s, run_s, seed, explorer, trial_index, created_at"
)


@dataclass
class MergeSummary:
    """What :func:`merge` did: trials ``added`` and ``skipped`` (already there) per source
    file, runs copied, and the (workload, target) pairs of the output."""

    output: Path
    added: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    runs: int = 0
    workloads: int = 0


def _key(rec: TrialRecord) -> tuple[object, ...]:
    return (
        json.dumps(dict(sorted(rec.assignment.items())), separators=(",", ":")),
        rec.latency_s,
        rec.error_kind,
        round(rec.created_at, 6),
    )


def merge(sources: Sequence[str | Path], output: str | Path) -> MergeSummary:
    """Copy every run and trial of ``sources`` into ``output`` (created if missing; may be
    one of the sources' own copy, never one of the sources).

    Raises:
        InvalidArgumentError: no sources, or ``output`` is one of them.
        RecordsMismatchError: a source is missing or not a heronlike records file.
    """
    if not sources:
        raise InvalidArgumentError("give at least one records file to merge")
    out_path = Path(output)
    for s in sources:
        if not Path(s).is_file():
            raise RecordsMismatchError(f"{s}: no such records file")
        if out_path.exists() and Path(s).resolve() == out_path.resolve():
            raise InvalidArgumentError(f"{s}: the output must not be one of the sources")
    summary = MergeSummary(out_path)
    with Records(out_path) as out:
        for src in sources:
            Records(src).close()  # validates: a heronlike records file of a known schema
            conn = sqlite3.connect(f"file:{Path(src).resolve()}?mode=ro", uri=True)
            try:
                added = skipped = 0
                run_map: dict[int, int] = {}
                seen: dict[tuple[str, str], set[tuple[object, ...]]] = {}
                for wk, tk, desc, text in conn.execute(
                    "SELECT workload_key, target_key, description, compute_text FROM workloads"
                ):
                    out.register_workload(wk, description=desc, compute_text=text, target_key=tk)
                cur = conn.execute(f"SELECT {_COLUMNS}, run_id FROM trials ORDER BY id")
                for row in cur.fetchall():
                    rec = _row_to_record(row[:-1])
                    pair = (rec.workload_key, rec.target_key)
                    if pair not in seen:
                        seen[pair] = {_key(r) for r in out.trials(*pair)}
                    if _key(rec) in seen[pair]:
                        skipped += 1
                        continue
                    run_id = row[-1]
                    new_run = None
                    if run_id is not None:
                        if run_id not in run_map:
                            run_map[run_id] = _copy_run(conn, out, int(run_id), str(src))
                            summary.runs += 1
                        new_run = run_map[run_id]
                    out.append(rec, new_run)  # renumbered after the trials already there
                    seen[pair].add(_key(rec))
                    added += 1
            finally:
                conn.close()
            summary.added[str(src)] = added
            summary.skipped[str(src)] = skipped
        summary.workloads = len(out.workloads())
    return summary


def _copy_run(conn: sqlite3.Connection, out: Records, run_id: int, source: str) -> int:
    row = conn.execute(
        "SELECT workload_key, target_key, seed, explorer, trials_requested, versions_json, "
        "options_json, wall_s, best_latency_s FROM runs WHERE run_id = ?",
        (run_id,),
    ).fetchone()
    wk, tk, seed, explorer, requested, versions, options, wall, best = row
    opts = json.loads(options)
    opts.update({"merged_from": source, "source_run_id": run_id})
    new = out.start_run(
        workload_key=wk,
        target_key=tk,
        seed=seed,
        explorer=explorer,
        trials_requested=requested,
        versions=json.loads(versions),
        options=opts,
    )
    if wall is not None:
        out.finish_run(new, best_latency_s=best, wall_s=wall)
    return new
