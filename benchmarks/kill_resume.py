"""kill -9 a tune at random moments and check that nothing measured is lost or repeated.

Each round starts ``heronlike.tune`` in a child process on one records file, waits until the
child has finished a random number of new runs (counted by a runner wrapper that appends one
line to a log file as each run finishes, *before* the tune loop commits it), then SIGKILLs it.
After each kill it counts, from the records and the log:

* ``ran``: runs that finished according to the log, over all rounds so far;
* ``recorded``: trials in the records that reached the runner (ok, or a run-time failure);
* ``lost``: runs measured but never committed by this kill, ``(ran - recorded)`` now minus
  the same before it (``lost_total`` keeps the running sum; a lost trial is measured again by
  the next round). The tune loop commits every trial as its outcome is known, so a kill can
  lose at most the one trial between its log line and its commit (``in flight``: 1 with a
  one-at-a-time runner);
* whether the kill fell inside a batch (the committed count is not a multiple of the batch
  size), which the old batch-at-a-time commit could never leave behind.

A final un-killed run completes the budget; the records must then hold exactly ``trials`` trials
with indices ``0 .. trials-1`` and no assignment measured twice.

Usage::

    python benchmarks/kill_resume.py --kills 10 --trials 64      # the issue's check
    python benchmarks/kill_resume.py --kills 2 --trials 16 --quick

Writes ``benchmarks/results/kill_resume.csv`` (one row per kill, the CPU model and date in every
row) unless ``--no-csv``.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

from heronlike.host import cpu_model

REPO = Path(__file__).resolve().parents[1]
RUN_KINDS = ("run", "run_timeout", "crash", "wrong_result")

CHILD = textwrap.dedent(
    """
    import os, sys
    from heronlike import ops, tune
    from heronlike.target import get_target

    records, log, trials, batch, n = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
    target, min_repeat_ms = sys.argv[6], float(sys.argv[7])
    inner = get_target(target).make_runner(
        timeout_s=30, number=1, repeat=2, min_repeat_ms=min_repeat_ms
    )
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT)

    class LoggingRunner:
        number, repeat = inner.number, inner.repeat

        def run(self, inputs, on_result=None):
            def done(i, r):
                os.write(fd, b"ran\\n")  # the run finished; the loop commits it next
                if on_result is not None:
                    on_result(i, r)

            inner.number, inner.repeat = self.number, self.repeat
            return inner.run(inputs, on_result=done)

        def close(self):
            inner.close()

    r = tune(ops.gemm(n, n, n, "float32"), target, trials=trials, batch_size=batch, seed=0,
             records=records, runner=LoggingRunner(), number=1, repeat=2,
             min_repeat_ms=min_repeat_ms,
             final_repeat=2)
    print("DONE", r.trials, r.trials_run, flush=True)
    """
)


def _count_lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def _trials(records: Path) -> list[tuple[int, str, str | None]]:
    """(trial_index, assignment JSON, error kind) of every trial, read-only."""
    if not records.exists():
        return []
    con = sqlite3.connect(f"file:{records}?mode=ro", uri=True, timeout=30)
    try:
        return con.execute(
            "SELECT trial_index, assignment_json, error_kind FROM trials ORDER BY trial_index"
        ).fetchall()
    except sqlite3.OperationalError:  # the schema is not there yet
        return []
    finally:
        con.close()


def _child(records: Path, log: Path, trials: int, batch: int, n: int, target: str) -> Any:
    # each run times 2 × 20 ms, so a kill lands while a run is going on, not after a batch
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(records), str(log), str(trials), str(batch), str(n)]
        + [target, "20"],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_kills(
    work: Path,
    *,
    kills: int,
    trials: int,
    batch: int,
    n: int = 32,
    target: str = "dlboost -general",
    seed: int = 0,
    timeout_s: float = 600.0,
    points: list[int] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Kill a ``trials``-trial tune ``kills`` times at random moments, then let it finish.

    Args:
        work: a folder for the records file and the run log (created).
        kills: how many rounds end in SIGKILL.
        trials, batch: the tune's trial budget and batch size.
        n: the float32 GEMM's M = N = K.
        target: target string; the default runs on any x86 CPU.
        seed: seed of the random kill points.
        points: instead of random kill points, kill round ``i`` after ``points[i]`` new runs.
        timeout_s: limit for one round, seconds.

    Returns:
        ``(rows, final)``: one dict per kill (``kill``, ``ran``, ``recorded``, ``lost`` by this
        kill, ``lost_total``, ``in_flight``, ``mid_batch``, ``committed``; ``ran``, ``recorded``
        and ``committed`` count over all rounds so far) and the final check (``trials``,
        ``indices_ok``, ``duplicates``, ``returncode``).

    Raises:
        RuntimeError: a child ended by itself before it could be killed, with its stderr.
    """
    import random

    rng = random.Random(seed)
    work.mkdir(parents=True, exist_ok=True)
    records, log = work / "records.sqlite", work / "runs.log"
    for p in (records, log):
        p.unlink(missing_ok=True)
    rows = []
    lost_before = 0
    for kill in range(kills):
        ran_before = _count_lines(log)
        remaining = trials - len(_trials(records))
        if remaining < 2:
            break
        if points is not None:
            target_runs = ran_before + points[kill]
        else:
            # spread the kills over the budget: on average half of a fair share per round
            share = max(1, (remaining - 1) // (kills - kill))
            target_runs = ran_before + rng.randint(1, min(remaining - 1, share))
        # the kill then waits a random fraction of one run (40 ms) more
        delay = rng.random() * 0.04 if points is None else 0.0
        child = _child(records, log, trials, batch, n, target)
        t0 = time.monotonic()
        while _count_lines(log) < target_runs:
            if child.poll() is not None:
                raise RuntimeError(f"child ended before the kill: {child.stderr.read()[-2000:]}")
            if time.monotonic() - t0 > timeout_s:
                child.kill()
                raise RuntimeError("child made no progress")
            time.sleep(0.001)
        time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        stored = _trials(records)
        recorded = sum(1 for _, _, kind in stored if kind is None or kind in RUN_KINDS)
        ran = _count_lines(log)
        lost_total = ran - recorded
        rows.append(
            {
                "kill": kill,
                "committed": len(stored),
                "ran": ran,
                "recorded": recorded,
                "lost": lost_total - lost_before,
                "lost_total": lost_total,
                "in_flight": 1,
                "mid_batch": len(stored) % batch != 0,
            }
        )
        lost_before = lost_total
    child = _child(records, log, trials, batch, n, target)
    out, err = child.communicate(timeout=timeout_s)
    stored = _trials(records)
    keys = [a for _, a, _ in stored]
    final = {
        "returncode": child.returncode,
        "trials": len(stored),
        "indices_ok": [i for i, _, _ in stored] == list(range(len(stored))),
        "duplicates": len(keys) - len(set(keys)),
        "stdout": out.strip()[-300:],
        "stderr": err.strip()[-2000:] if child.returncode else "",
    }
    return rows, final


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kills", type=int, default=10)
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--n", type=int, default=64, help="float32 GEMM M = N = K")
    ap.add_argument("--target", default="dlboost -general")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", type=Path, default=REPO / "benchmarks" / "out" / "kill_resume")
    ap.add_argument("--csv", type=Path, default=REPO / "benchmarks" / "results" / "kill_resume.csv")
    ap.add_argument("--no-csv", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    rows, final = run_kills(
        args.work,
        kills=args.kills,
        trials=args.trials,
        batch=args.batch,
        n=args.n,
        target=args.target,
        seed=args.seed,
    )
    machine, date = cpu_model(), dt.date.today().isoformat()
    for r in rows:
        print(
            f"kill {r['kill']}: {r['committed']} committed, {r['ran']} runs finished, "
            f"{r['recorded']} recorded, lost {r['lost']} (in flight {r['in_flight']}), "
            f"mid-batch {r['mid_batch']}"
        )
    ok = (
        final["returncode"] == 0
        and final["trials"] == args.trials
        and final["indices_ok"]
        and final["duplicates"] == 0
        and all(r["lost"] <= r["in_flight"] for r in rows)
    )
    print(
        f"final: {final['trials']} trials, indices 0..{final['trials'] - 1} "
        f"{'contiguous' if final['indices_ok'] else 'BROKEN'}, {final['duplicates']} duplicates; "
        f"{'OK' if ok else 'FAILED'} ({time.monotonic() - t0:.0f} s on {machine}, {date})"
    )
    if final["stderr"]:
        print(final["stderr"], file=sys.stderr)
    if not args.no_csv and rows:
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with open(args.csv, "w", newline="") as fh:
            w = csv.DictWriter(fh, [*rows[0], "trials", "batch", "final_ok", "cpu", "date"])
            w.writeheader()
            for r in rows:
                w.writerow(
                    {
                        **r,
                        "trials": args.trials,
                        "batch": args.batch,
                        "final_ok": ok,
                        "cpu": machine,
                        "date": date,
                    }
                )
        print(f"wrote {args.csv}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
