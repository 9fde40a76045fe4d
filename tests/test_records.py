"""Tests of heronlike.records on real SQLite files (no mocks)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from heronlike.errors import RecordsMismatchError
from heronlike.records import SCHEMA_VERSION, Records, TrialRecord

WK = "wk-" + "a" * 16
TK = "llvm -mcpu=test"


def rec(i: int, latency: float | None = None, error: str | None = None, **kw) -> TrialRecord:
    fields = dict(
        workload_key=WK,
        target_key=TK,
        assignment={"tile_i": 4 * (i + 1), "tile_j": 8, "a_unroll": i % 2},
        latency_s=latency,
        error_kind=error,
        error_msg=None if error is None else f"{error} failed",
        explore_s=0.01,
        solve_s=0.02,
        build_s=0.3,
        run_s=0.4,
        seed=7,
        explorer="random",
        trial_index=i,
    )
    fields.update(kw)
    return TrialRecord(**fields)


def test_roundtrip_count_best(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "dir" / "records.db"
    with Records(path) as db:
        assert path.exists()
        assert db.schema_version == SCHEMA_VERSION
        assert db.count(WK, TK) == 0
        assert db.best(WK, TK) is None
        run = db.start_run(
            workload_key=WK,
            target_key=TK,
            seed=7,
            explorer="random",
            trials_requested=4,
            versions={"heronlike": "0.1.0", "python": "3.11"},
            options={"batch": 2},
        )
        added = [
            db.add(rec(0, 3e-3), run),
            db.add(rec(1, None, "build"), run),
            db.add(rec(2, 1e-3), run),
            db.add(rec(3, 5e-4, "wrong_result"), run),  # has a latency, but wrong: not best
        ]
        assert all(r.created_at > 0 for r in added)
        db.finish_run(run, best_latency_s=1e-3, wall_s=1.5)
        info = db.run_info(run)
        assert info["versions"]["heronlike"] == "0.1.0"
        assert info["options"] == {"batch": 2}
        assert info["best_latency_s"] == 1e-3 and info["wall_s"] == 1.5
        with pytest.raises(KeyError):
            db.finish_run(run + 100, best_latency_s=None, wall_s=0.0)

    with Records(path) as db:  # reopen: everything is there
        got = db.trials(WK, TK)
        assert got == added
        assert [r.trial_index for r in got] == [0, 1, 2, 3]
        assert [r.ok for r in got] == [True, False, True, False]
        assert got[0].assignment == {"a_unroll": 0, "tile_i": 4, "tile_j": 8}
        assert db.count(WK, TK) == 4
        assert db.next_trial_index(WK, TK) == 4
        best = db.best(WK, TK)
        assert best is not None and best.trial_index == 2 and best.latency_s == 1e-3
        assert db.count("other", TK) == 0 and db.trials(WK, "other") == []


def test_best_none_when_all_failed(tmp_path: Path) -> None:
    with Records(tmp_path / "r.db") as db:
        db.add(rec(0, None, "run_timeout"))
        db.add(rec(1, None, "crash"))
        assert db.count(WK, TK) == 2
        assert db.best(WK, TK) is None
        [row] = db.workloads()
        assert row["trials"] == 2 and row["ok_trials"] == 0 and row["best_latency_s"] is None


def test_duplicate_trial_index_raises_and_keeps_original(tmp_path: Path) -> None:
    with Records(tmp_path / "r.db") as db:
        db.add(rec(0, 2e-3))
        with pytest.raises(sqlite3.IntegrityError):
            db.add(rec(0, 1e-9))
        [only] = db.trials(WK, TK)
        assert only.latency_s == 2e-3
        # Same index under another target is a different history: allowed.
        db.add(rec(0, 1e-3, target_key="other-target"))
        assert db.count(WK, "other-target") == 1


def test_register_workload_idempotent_and_listing(tmp_path: Path) -> None:
    with Records(tmp_path / "r.db") as db:
        for _ in range(3):
            db.register_workload(WK, description="gemm 64", compute_text="C = A @ B", target_key=TK)
        db.register_workload("wk2", description="conv", compute_text="conv2d", target_key=TK)
        db.register_workload(WK, description="changed", compute_text="x", target_key=TK)
        info = db.workload_info(WK, TK)
        assert info is not None and info["description"] == "gemm 64"
        assert info["compute_text"] == "C = A @ B"
        assert db.workload_info("nope", TK) is None
        db.add(rec(0, 2e-3))
        db.add(rec(1, None, "build"))
        db.add(rec(2, 1e-3))
        rows = {(r["workload_key"], r["target_key"]): r for r in db.workloads()}
        assert len(rows) == 2
        assert rows[(WK, TK)] == {
            "workload_key": WK,
            "target_key": TK,
            "description": "gemm 64",
            "trials": 3,
            "ok_trials": 2,
            "best_latency_s": 1e-3,
        }
        assert rows[("wk2", TK)]["trials"] == 0
        assert rows[("wk2", TK)]["best_latency_s"] is None


def test_export_jsonl(tmp_path: Path) -> None:
    with Records(tmp_path / "r.db") as db:
        run = db.start_run(
            workload_key=WK,
            target_key=TK,
            seed=7,
            explorer="random",
            trials_requested=3,
            versions={},
        )
        db.add(rec(0, 2e-3), run)
        db.add(rec(1, None, "build"), run)
        db.add(rec(2, 1e-3))
        out = tmp_path / "out" / "trials.jsonl"
        assert db.export_jsonl(out) == 3
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [d["trial_index"] for d in lines] == [0, 1, 2]
    assert [d["ok"] for d in lines] == [True, False, True]
    assert [d["run_id"] for d in lines] == [run, run, None]
    assert lines[1]["error_kind"] == "build" and lines[1]["latency_s"] is None
    assert lines[0]["assignment"] == {"a_unroll": 0, "tile_i": 4, "tile_j": 8}
    fields = set(TrialRecord.__dataclass_fields__)
    assert fields <= set(lines[0])
    again = TrialRecord(**{k: lines[2][k] for k in fields})
    assert again.latency_s == 1e-3 and again.ok


def test_nothing_lost_when_killed(tmp_path: Path) -> None:
    path = tmp_path / "killed.db"
    script = textwrap.dedent(
        f"""
        import os
        from heronlike.records import Records, TrialRecord
        db = Records({str(path)!r})
        run = db.start_run(workload_key="w", target_key="t", seed=1, explorer="random",
                           trials_requested=100, versions={{"python": "x"}})
        for i in range(5):
            db.add(TrialRecord("w", "t", {{"x": i}}, 1e-3 * (i + 1), None, None,
                               0.0, 0.0, 0.0, 0.0, 1, "random", i), run)
        os._exit(1)  # killed mid-run: no close, no finish_run, no atexit
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=60)
    assert proc.returncode == 1, proc.stderr.decode()
    with Records(path) as db:
        got = db.trials("w", "t")
        assert [r.assignment for r in got] == [{"x": i} for i in range(5)]
        assert db.best("w", "t").latency_s == pytest.approx(1e-3)  # type: ignore[union-attr]
        assert db.next_trial_index("w", "t") == 5
        db.add(rec(5, 1e-4, workload_key="w", target_key="t"))  # resume appends
        assert db.count("w", "t") == 6


def test_concurrent_reader_while_writer_adds(tmp_path: Path) -> None:
    path = tmp_path / "shared.db"
    Records(path).close()
    n = 60
    seen: list[int] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            with Records(path) as db:
                while not done.is_set():
                    c = db.count(WK, TK)
                    ts = db.trials(WK, TK)
                    assert len(ts) >= c  # monotone: never loses rows
                    assert [t.trial_index for t in ts] == list(range(len(ts)))
                    db.workloads()
                    seen.append(c)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    try:
        with Records(path) as writer:
            for i in range(n):
                writer.add(rec(i, 1e-3 + i * 1e-6))
    finally:
        done.set()
        t.join(timeout=30)
    assert not errors, errors
    assert seen == sorted(seen)
    # And a reader in another process sees every row while the writer's connection is open.
    with Records(path) as writer:
        writer.add(rec(n, 1e-9))
        code = (
            "from heronlike.records import Records; "
            f"db = Records({str(path)!r}); print(db.count({WK!r}, {TK!r}), "
            f"db.best({WK!r}, {TK!r}).trial_index)"
        )
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [str(n + 1), str(n)]


def test_not_sqlite_raises(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all\n" * 200)
    with pytest.raises(RecordsMismatchError):
        Records(path)
    assert path.read_bytes().startswith(b"this is not")  # left untouched


def test_foreign_sqlite_raises(tmp_path: Path) -> None:
    path = tmp_path / "foreign.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE people (name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(RecordsMismatchError):
        Records(path)
    # A foreign DB that happens to have a meta table is still not ours.
    path2 = tmp_path / "foreign2.db"
    conn = sqlite3.connect(path2)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('application', 'something-else')")
    conn.commit()
    conn.close()
    with pytest.raises(RecordsMismatchError):
        Records(path2)


def test_newer_schema_raises(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    Records(path).close()
    conn = sqlite3.connect(path)
    conn.execute(
        "UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),)
    )
    conn.commit()
    conn.close()
    with pytest.raises(RecordsMismatchError, match="newer"):
        Records(path)


def test_closed_and_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.write_bytes(b"")  # a zero-byte file is an empty SQLite DB: initialise it
    db = Records(path)
    db.add(rec(0, 1e-3))
    db.close()
    db.close()
    with pytest.raises(sqlite3.ProgrammingError):
        db.count(WK, TK)
    with Records(path) as again:
        assert again.count(WK, TK) == 1


def test_info_roundtrip_and_older_file_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    with Records(path) as db:
        db.add(rec(0, 1e-3, info={"cycles": 1234, "engines": {"load": 7}}))
        db.add(rec(1, 2e-3))
    with Records(path) as db:
        first, second = db.trials(WK, TK)
        assert first.info == {"cycles": 1234, "engines": {"load": 7}}
        assert second.info == {}
    # a file written before trials.info_json existed: drop the column, reopen, write again
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE trials DROP COLUMN info_json")
    conn.commit()
    conn.close()
    with Records(path) as db:
        assert [t.info for t in db.trials(WK, TK)] == [{}, {}]
        db.add(rec(2, 3e-3, info={"cycles": 9}))
        assert db.trials(WK, TK)[-1].info == {"cycles": 9}


def test_the_picked_finalist_is_chosen_over_the_fastest_tuning_time(tmp_path: Path) -> None:
    """A tune's re-measured pick is recorded with its run; chosen() returns it, the latest
    run's pick first, and falls back to the fastest trial where no run picked one (an older
    file gains the columns)."""
    path = tmp_path / "r.db"
    versions = {"heronlike": "x"}
    with Records(path) as db:
        run = db.start_run(
            workload_key=WK, target_key=TK, seed=1, explorer="cga", trials_requested=3,
            versions=versions,
        )  # fmt: skip
        for i, lat in enumerate([3e-3, 1e-3, 2e-3]):
            db.add(rec(i, lat), run)
        assert db.picked(WK, TK) is None
        assert db.chosen(WK, TK).trial_index == 1  # no pick: the fastest tuning-time latency
        # the finish re-measured trials 1 and 2 side by side and picked 2
        db.finish_run(run, best_latency_s=1e-3, wall_s=1.0, picked_trial=2, picked_latency_s=9e-4)
        assert db.picked(WK, TK).trial_index == 2
        assert db.chosen(WK, TK).trial_index == 2
        assert db.chosen(WK, TK, where=lambda r: r.trial_index != 2).trial_index == 1
        assert db.run_info(run)["picked_latency_s"] == 9e-4
        later = db.start_run(
            workload_key=WK, target_key=TK, seed=2, explorer="cga", trials_requested=1,
            versions=versions,
        )  # fmt: skip
        db.add(rec(3, 5e-4), later)
        db.finish_run(later, best_latency_s=5e-4, wall_s=1.0, picked_trial=3, picked_latency_s=6e-4)
        assert db.chosen(WK, TK).trial_index == 3  # the latest run's pick
        assert db.chosen(WK, TK, where=lambda r: r.trial_index != 3).trial_index == 2
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE runs DROP COLUMN picked_trial")
    conn.execute("ALTER TABLE runs DROP COLUMN picked_latency_s")
    conn.commit()
    conn.close()
    with Records(path) as db:  # a file from before picks were recorded
        assert db.picked(WK, TK) is None and db.chosen(WK, TK).trial_index == 3
