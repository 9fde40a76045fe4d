"""The trial records database: every measured trial of a tune, committed as it happens.

Like Kernel Tuner's cache file and TVM MetaSchedule's tuning-record database, a records file is
the durable memory of tuning, so that a killed tune resumes with nothing lost and
:func:`heronlike.apply_best` can rebuild the best kernel later without tuning again.

Storage is one embedded SQLite file (stdlib :mod:`sqlite3`, WAL journal). It holds four tables:

* ``meta`` -- key/value pairs: ``schema_version`` (currently 1), ``created_by`` (the heronlike
  version that created the file), ``application`` (the fixed tag ``heronlike-records``).
* ``workloads`` -- one row per (workload key, target key): a human description and the text of
  the compute it was registered with.
* ``runs`` -- one header row per tune session: seed, explorer, trials requested, the versions of
  heronlike/TVM/OR-Tools/XGBoost/Python, options, wall time and the best latency found.
* ``trials`` -- one row per measured trial (see :class:`TrialRecord`), with the CSP assignment
  stored as canonical JSON (sorted keys). ``(workload_key, target_key, trial_index)`` is UNIQUE,
  so a resumed run can never silently overwrite an earlier trial.

Every :meth:`Records.add` and :meth:`Records.append` commits before returning. Any number of
processes may read and write one file at once (tunes, library and model builds, ``heronlike
best``): :meth:`Records.append` allocates each trial's index inside one write transaction, so
concurrent writers never collide, and a writer that finds the file locked waits for it (up to
``busy_timeout_s``) before raising :class:`~heronlike.errors.RecordsBusyError`.
All times are in seconds.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from .errors import RecordsBusyError, RecordsMismatchError

_T = TypeVar("_T")

__all__ = [
    "SCHEMA_VERSION",
    "APPLICATION_TAG",
    "VERSION_KEYS",
    "TrialRecord",
    "Records",
    "current_versions",
]

SCHEMA_VERSION = 1
"""Version of the on-disk schema this module writes and reads."""

APPLICATION_TAG = "heronlike-records"
"""Value of ``meta.application`` that marks a file as a heronlike records database."""

VERSION_KEYS = ("heronlike", "tvm")


def current_versions() -> dict[str, str]:
    """This process's value of each of :data:`VERSION_KEYS`: what a trial must have been
    recorded with to be reused (:meth:`Records.split_by_version`)."""
    import tvm

    from . import __version__

    return {"heronlike": __version__, "tvm": tvm.__version__}


"""The components whose versions must match for a stored trial to count as today's: another
heronlike may have other rules or spaces, another TVM other code generation."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS workloads (
    workload_key  TEXT NOT NULL,
    target_key    TEXT NOT NULL,
    description   TEXT NOT NULL,
    compute_text  TEXT NOT NULL,
    created_at    REAL NOT NULL,
    PRIMARY KEY (workload_key, target_key)
);
CREATE TABLE IF NOT EXISTS runs (
    run_id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workload_key      TEXT NOT NULL,
    target_key        TEXT NOT NULL,
    seed              INTEGER NOT NULL,
    explorer          TEXT NOT NULL,
    trials_requested  INTEGER NOT NULL,
    versions_json     TEXT NOT NULL,
    options_json      TEXT NOT NULL,
    started_at        REAL NOT NULL,
    finished_at       REAL,
    wall_s            REAL,
    best_latency_s    REAL,
    picked_trial      INTEGER,
    picked_latency_s  REAL
);
CREATE TABLE IF NOT EXISTS trials (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    workload_key     TEXT NOT NULL,
    target_key       TEXT NOT NULL,
    trial_index      INTEGER NOT NULL,
    run_id           INTEGER REFERENCES runs(run_id),
    assignment_json  TEXT NOT NULL,
    latency_s        REAL,
    error_kind       TEXT,
    error_msg        TEXT,
    explore_s        REAL NOT NULL,
    solve_s          REAL NOT NULL,
    build_s          REAL NOT NULL,
    run_s            REAL NOT NULL,
    seed             INTEGER NOT NULL,
    explorer         TEXT NOT NULL,
    created_at       REAL NOT NULL,
    info_json        TEXT,
    UNIQUE (workload_key, target_key, trial_index)
);
CREATE INDEX IF NOT EXISTS trials_by_key
    ON trials (workload_key, target_key, trial_index);
"""

_TRIAL_COLUMNS = (
    "workload_key, target_key, assignment_json, latency_s, error_kind, error_msg, explore_s, "
    "solve_s, build_s, run_s, seed, explorer, trial_index, created_at, info_json"
)


def _canonical_json(obj: Any) -> str:
    """JSON text with sorted keys and no spaces, so equal values give equal text."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass(frozen=True)
class TrialRecord:
    """One measured trial of one candidate program.

    Attributes:
        workload_key: sha256-based key of the compute (chosen by the caller).
        target_key: canonical target string (chosen by the caller).
        assignment: the value of every CSP variable of the candidate.
        latency_s: median measured latency in seconds; ``None`` when the trial failed.
        error_kind: ``None`` on success; otherwise a short tag such as ``"schedule"``,
            ``"build"``, ``"build_timeout"``, ``"run"``, ``"run_timeout"``, ``"crash"`` or
            ``"wrong_result"``.
        error_msg: human-readable detail of the failure, or ``None``.
        explore_s: seconds spent in the explorer (cost model included) for this trial's share
            of its batch.
        solve_s: seconds spent in CP-SAT for this trial.
        build_s: seconds spent building the candidate.
        run_s: seconds spent running/measuring the candidate.
        seed: the tune's random seed.
        explorer: name of the explorer that proposed the candidate.
        trial_index: 0-based index of this trial in the (workload, target) history.
        created_at: unix time the trial was recorded; :meth:`Records.add` fills it when 0.
        info: what the runner reported beside the latency (JSON-ready; e.g. a simulator's
            cycles, per-engine busy and stall cycles, DMA bytes), and ``variant_of``: for a
            variant trial (a finish knob's other value, :meth:`TuningSession.round
            <heronlike.session.TuningSession.round>`) the trial it varies; empty when there is
            nothing. Stored as ``info_json`` (NULL when empty).
    """

    workload_key: str
    target_key: str
    assignment: dict[str, int]
    latency_s: float | None
    error_kind: str | None
    error_msg: str | None
    explore_s: float
    solve_s: float
    build_s: float
    run_s: float
    seed: int
    explorer: str
    trial_index: int
    created_at: float = field(default=0.0)
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the trial succeeded: no error kind and a finite, non-negative latency."""
        return (
            self.error_kind is None
            and self.latency_s is not None
            and math.isfinite(self.latency_s)
            and self.latency_s >= 0.0
        )

    def at(self, point: Mapping[str, int]) -> TrialRecord:
        """This record with ``point`` as its assignment (itself when they are equal): the
        record as today's space reads it (:meth:`heronlike.space.Space.fit`, which completes
        an assignment recorded without the variables today's rules derive from its knobs)."""
        return self if point == self.assignment else replace(self, assignment=dict(point))

    def to_json_dict(self) -> dict[str, Any]:
        """The record as a plain JSON-ready dict (``ok`` included), as written by export."""
        d = asdict(self)
        d["assignment"] = dict(sorted(self.assignment.items()))
        d["ok"] = self.ok
        return d


def _row_to_record(row: sqlite3.Row | tuple[Any, ...]) -> TrialRecord:
    values = tuple(row)
    (wk, tk, aj, lat, ek, em, ex, so, bu, ru, seed, explorer, idx, created) = values[:14]
    info = values[14] if len(values) > 14 else None
    return TrialRecord(
        workload_key=wk,
        target_key=tk,
        assignment={str(k): int(v) for k, v in json.loads(aj).items()},
        latency_s=None if lat is None else float(lat),
        error_kind=ek,
        error_msg=em,
        explore_s=float(ex),
        solve_s=float(so),
        build_s=float(bu),
        run_s=float(ru),
        seed=int(seed),
        explorer=explorer,
        trial_index=int(idx),
        created_at=float(created),
        info=json.loads(info) if info else {},
    )


def _corrupted(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says the file itself is bad (not a busy lock or a duplicate key)."""
    if isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
        return False
    text = str(exc).lower()
    return not isinstance(exc, sqlite3.OperationalError) or any(
        word in text for word in ("malformed", "not a database", "corrupt", "no such table")
    )


def _busy(exc: sqlite3.DatabaseError) -> bool:
    """Whether ``exc`` says another connection held the lock for longer than we waited."""
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _guarded(method: Callable[..., _T]) -> Callable[..., _T]:
    """Turn SQLite's errors about a damaged file into :class:`RecordsMismatchError`, and a lock
    held past the busy timeout into :class:`RecordsBusyError`, both naming the file."""

    @functools.wraps(method)
    def wrapper(self: Records, *args: Any, **kwargs: Any) -> _T:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if _busy(exc):
                raise RecordsBusyError(
                    f"{self.path}: the records database stayed locked by another process for "
                    f"more than {self.busy_timeout_s:g} s ({exc}); retry, or raise "
                    "busy_timeout_s"
                ) from exc
            if not _corrupted(exc):
                raise
            raise RecordsMismatchError(
                f"{self.path}: the records database is corrupted or not heronlike's ({exc}); "
                "move it aside (its trials are lost unless a backup exists) or pass another "
                "records path"
            ) from exc

    return wrapper


class Records:
    """A heronlike records database in one SQLite file; one row per trial, committed as it
    happens.

    Opening creates the parent directories, the file and the schema if missing, and switches the
    file to the WAL journal so readers in other processes never block a writer (nor the other
    way round). Any number of processes may write at once: SQLite serialises their write
    transactions, a writer waits up to ``busy_timeout_s`` seconds for the lock, and
    :meth:`append` numbers trials inside its write transaction so no index is taken twice.

    Args:
        path: the SQLite file (``":memory:"`` for a private in-memory database).
        busy_timeout_s: how long one statement waits for another process's lock, seconds.

    Raises:
        RecordsMismatchError: the file exists but is not a SQLite database, is a SQLite database
            of some other application, or has a schema version newer than this heronlike knows.
        RecordsBusyError: (from any method) another process held the lock for longer than
            ``busy_timeout_s``.
    """

    path: Path

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout_s: float = 60.0) -> None:
        """Open (creating if missing) the records database at ``path``.

        Raises:
            RecordsMismatchError: not a heronlike records DB, or a newer schema version.
            RecordsBusyError: the file stayed locked by another process past the timeout.
        """
        self.path = Path(path)
        self.busy_timeout_s = float(busy_timeout_s)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn: sqlite3.Connection | None = None
        try:
            conn = sqlite3.connect(str(self.path), timeout=self.busy_timeout_s)
        except sqlite3.DatabaseError as exc:  # pragma: no cover - connect is lazy in practice
            raise RecordsMismatchError(f"{self.path}: cannot open as SQLite: {exc}") from exc
        try:
            self._init_schema(conn)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if _busy(exc):
                raise RecordsBusyError(
                    f"{self.path}: the records database stayed locked by another process for "
                    f"more than {self.busy_timeout_s:g} s while opening ({exc})"
                ) from exc
            raise RecordsMismatchError(
                f"{self.path}: not a heronlike records database, or a corrupted one ({exc})"
            ) from exc
        except BaseException:
            conn.close()
            raise
        self._conn = conn

    # -- schema ---------------------------------------------------------------------------------

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        """Validate an existing file, or create the schema in an empty one."""
        if self._table_names(conn):
            self._check_ours(conn)
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)").fetchall()]
            if problems != ["ok"]:
                raise sqlite3.DatabaseError("; ".join(problems))
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._add_missing_columns(conn)
            return
        # Empty file: create everything in one write transaction. Another process may be
        # creating the same file right now; BEGIN IMMEDIATE serialises us, then re-check.
        from . import __version__

        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self._table_names(conn):
                conn.rollback()
                self._check_ours(conn)
                return
            for stmt in _SCHEMA.split(";"):
                if stmt.strip():
                    conn.execute(stmt)
            conn.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [
                    ("application", APPLICATION_TAG),
                    ("schema_version", str(SCHEMA_VERSION)),
                    ("created_by", f"heronlike {__version__}"),
                    ("created_at", repr(time.time())),
                ],
            )
            conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise

    @staticmethod
    def _add_missing_columns(conn: sqlite3.Connection) -> None:
        """Bring a file written before a nullable column existed up to date (an additive
        change, so the schema version stays): ``trials.info_json``, ``runs.picked_trial`` and
        ``runs.picked_latency_s``."""
        for table, column, kind in (
            ("trials", "info_json", "TEXT"),
            ("runs", "picked_trial", "INTEGER"),
            ("runs", "picked_latency_s", "REAL"),
        ):
            columns = {r[1] for r in conn.execute(f"PRAGMA table_info({table})").fetchall()}
            if column not in columns:
                with conn:
                    conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")

    @staticmethod
    def _table_names(conn: sqlite3.Connection) -> set[str]:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
        return {r[0] for r in rows} - {"sqlite_sequence"}

    def _check_ours(self, conn: sqlite3.Connection) -> None:
        """Raise RecordsMismatchError unless ``conn`` is a heronlike records DB we can read."""
        tables = self._table_names(conn)
        if not {"meta", "workloads", "runs", "trials"} <= tables:
            raise RecordsMismatchError(
                f"{self.path}: SQLite file is not a heronlike records database "
                f"(tables: {sorted(tables)})"
            )
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("application") != APPLICATION_TAG or "schema_version" not in meta:
            raise RecordsMismatchError(
                f"{self.path}: SQLite file is not a heronlike records database"
            )
        try:
            version = int(meta["schema_version"])
        except ValueError as exc:
            raise RecordsMismatchError(
                f"{self.path}: bad schema_version {meta['schema_version']!r}"
            ) from exc
        if version > SCHEMA_VERSION:
            raise RecordsMismatchError(
                f"{self.path}: records schema version {version} is newer than this heronlike "
                f"supports ({SCHEMA_VERSION}); upgrade heronlike"
            )

    @property
    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise sqlite3.ProgrammingError(f"{self.path}: records database is closed")
        return self._conn

    @property
    @_guarded
    def schema_version(self) -> int:
        """The schema version stored in the file's ``meta`` table."""
        row = self._db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        return int(row[0])

    # -- writing --------------------------------------------------------------------------------

    @_guarded
    def adopt(self, workload_key: str, legacy_key: str) -> int:
        """Rename the trials, runs and workload rows of ``legacy_key`` to ``workload_key`` when
        the file has none of ``workload_key`` yet: records written before workload keys were
        structural hashes (:attr:`heronlike.dag.ComputeDAG.legacy_workload_key`) are found
        again. Returns the number of trials renamed (0 when nothing was to do)."""
        if workload_key == legacy_key:
            return 0
        count = self._db.execute
        if count("SELECT 1 FROM trials WHERE workload_key = ? LIMIT 1", (workload_key,)).fetchone():
            return 0
        n = count("SELECT COUNT(*) FROM trials WHERE workload_key = ?", (legacy_key,)).fetchone()[0]
        if not n:
            return 0
        with self._db:
            for table in ("trials", "runs", "workloads"):
                self._db.execute(
                    f"UPDATE OR IGNORE {table} SET workload_key = ? WHERE workload_key = ?",
                    (workload_key, legacy_key),
                )
        return int(n)

    @_guarded
    def register_workload(
        self, workload_key: str, *, description: str, compute_text: str, target_key: str
    ) -> None:
        """Record a (workload, target) pair with a description and the compute's text.

        Idempotent: registering the same pair again keeps the first row and changes nothing.
        """
        with self._db:
            self._db.execute(
                "INSERT OR IGNORE INTO workloads "
                "(workload_key, target_key, description, compute_text, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (workload_key, target_key, description, compute_text, time.time()),
            )

    @_guarded
    def start_run(
        self,
        *,
        workload_key: str,
        target_key: str,
        seed: int,
        explorer: str,
        trials_requested: int,
        versions: Mapping[str, str],
        options: Mapping[str, object] | None = None,
    ) -> int:
        """Write the header row of one tune session and return its run id.

        ``versions`` maps component names (heronlike, tvm, ortools, xgboost, python) to version
        strings; ``options`` holds any further tune options (stored as JSON; values that JSON
        cannot hold are stored as their ``str``).
        """
        with self._db:
            cur = self._db.execute(
                "INSERT INTO runs (workload_key, target_key, seed, explorer, trials_requested, "
                "versions_json, options_json, started_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    workload_key,
                    target_key,
                    int(seed),
                    explorer,
                    int(trials_requested),
                    _canonical_json(dict(versions)),
                    _canonical_json(dict(options or {})),
                    time.time(),
                ),
            )
        assert cur.lastrowid is not None
        return int(cur.lastrowid)

    @_guarded
    def finish_run(
        self,
        run_id: int,
        *,
        best_latency_s: float | None,
        wall_s: float,
        picked_trial: int | None = None,
        picked_latency_s: float | None = None,
    ) -> None:
        """Close the header row of run ``run_id`` with its best latency (seconds, or ``None``
        when no trial succeeded), its wall time in seconds and, when the run re-measured its
        finalists, the trial index of the one it picked and its re-measured latency (seconds;
        :meth:`picked` returns it).

        Raises:
            KeyError: no run has that id.
        """
        with self._db:
            cur = self._db.execute(
                "UPDATE runs SET finished_at = ?, wall_s = ?, best_latency_s = ?, "
                "picked_trial = ?, picked_latency_s = ? WHERE run_id = ?",
                (
                    time.time(),
                    float(wall_s),
                    best_latency_s,
                    picked_trial,
                    picked_latency_s,
                    int(run_id),
                ),
            )
        if cur.rowcount == 0:
            raise KeyError(f"no run with id {run_id} in {self.path}")

    @_guarded
    def run_info(self, run_id: int) -> dict[str, Any]:
        """The header row of run ``run_id`` as a dict (versions/options decoded from JSON).

        Raises:
            KeyError: no run has that id.
        """
        cur = self._db.execute("SELECT * FROM runs WHERE run_id = ?", (int(run_id),))
        row = cur.fetchone()
        if row is None:
            raise KeyError(f"no run with id {run_id} in {self.path}")
        d = dict(zip([c[0] for c in cur.description], row, strict=True))
        d["versions"] = json.loads(d.pop("versions_json"))
        d["options"] = json.loads(d.pop("options_json"))
        return d

    @_guarded
    def add(self, record: TrialRecord, run_id: int | None = None) -> TrialRecord:
        """Insert one trial and commit immediately; return the record with ``created_at`` set.

        Raises:
            sqlite3.IntegrityError: a trial with the same (workload_key, target_key,
                trial_index) already exists; the stored trial is never overwritten.
        """
        if not record.created_at:
            record = replace(record, created_at=time.time())
        with self._db:
            self._insert(record, run_id)
        return record

    def _insert(self, record: TrialRecord, run_id: int | None) -> None:
        """The INSERT of one trial, inside the caller's transaction."""
        self._db.execute(
            f"INSERT INTO trials ({_TRIAL_COLUMNS}, run_id) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                record.workload_key,
                record.target_key,
                _canonical_json({str(k): int(v) for k, v in record.assignment.items()}),
                None if record.latency_s is None else float(record.latency_s),
                None if record.error_kind is None else str(record.error_kind),
                record.error_msg,
                float(record.explore_s),
                float(record.solve_s),
                float(record.build_s),
                float(record.run_s),
                int(record.seed),
                record.explorer,
                int(record.trial_index),
                float(record.created_at),
                _canonical_json(dict(record.info)) if record.info else None,
                run_id,
            ),
        )

    @_guarded
    def append(self, record: TrialRecord, run_id: int | None = None) -> TrialRecord:
        """Insert one trial as the next of its (workload, target) and commit immediately.

        The index is one past the highest stored, read and written inside one ``BEGIN
        IMMEDIATE`` transaction, so processes appending to the same workload at once get
        distinct, gap-free indices; ``record.trial_index`` is ignored.

        Returns:
            The record as stored: its ``trial_index`` and ``created_at`` filled in.

        Raises:
            RecordsBusyError: another process held the write lock past ``busy_timeout_s``.
        """
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            (top,) = db.execute(
                "SELECT MAX(trial_index) FROM trials WHERE workload_key = ? AND target_key = ?",
                (record.workload_key, record.target_key),
            ).fetchone()
            record = replace(
                record,
                trial_index=0 if top is None else int(top) + 1,
                created_at=record.created_at or time.time(),
            )
            self._insert(record, run_id)
            db.commit()
        except BaseException:
            if db.in_transaction:
                db.rollback()
            raise
        return record

    # -- reading --------------------------------------------------------------------------------

    @_guarded
    def trials(
        self, workload_key: str, target_key: str, *, after: int | None = None
    ) -> list[TrialRecord]:
        """All trials of (workload, target), ok or failed, in ``trial_index`` order; with
        ``after``, only those whose index is greater (what other processes added since)."""
        rows = self._db.execute(
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
            "AND trial_index > ? ORDER BY trial_index",
            (workload_key, target_key, -1 if after is None else int(after)),
        ).fetchall()
        return [_row_to_record(r) for r in rows]

    @_guarded
    def count(self, workload_key: str, target_key: str) -> int:
        """Number of trials (ok or failed) stored for (workload, target)."""
        row = self._db.execute(
            "SELECT COUNT(*) FROM trials WHERE workload_key = ? AND target_key = ?",
            (workload_key, target_key),
        ).fetchone()
        return int(row[0])

    @_guarded
    def next_trial_index(self, workload_key: str, target_key: str) -> int:
        """The trial index a resumed tune should use next: one past the highest stored."""
        row = self._db.execute(
            "SELECT MAX(trial_index) FROM trials WHERE workload_key = ? AND target_key = ?",
            (workload_key, target_key),
        ).fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    @_guarded
    def best(
        self,
        workload_key: str,
        target_key: str,
        where: Callable[[TrialRecord], bool] | None = None,
    ) -> TrialRecord | None:
        """The ok trial with the lowest latency (ties: the earliest) for which ``where`` (if
        given) is true, or ``None`` if there is none.

        Failed trials (an error kind, or no latency) are never returned. ``where`` filters, for
        example, trials whose assignment no longer fits today's space, or trials of another
        heronlike version (:meth:`versions_of`).
        """
        top = self.top(workload_key, target_key, 1, where)
        return top[0] if top else None

    @_guarded
    def picked(
        self,
        workload_key: str,
        target_key: str,
        where: Callable[[TrialRecord], bool] | None = None,
    ) -> TrialRecord | None:
        """The trial the latest finished run of (workload, target) picked by re-measuring its
        finalists (:func:`heronlike.tune`'s kernel), if it is ok and ``where`` (if given) is
        true of it; else the picks of earlier runs, latest first; ``None`` when no run picked
        one (records written before picks were recorded, or simulated tunes)."""
        columns = ", ".join(f"t.{c.strip()}" for c in _TRIAL_COLUMNS.split(","))
        rows = self._db.execute(
            f"SELECT {columns} FROM runs r JOIN trials t ON t.workload_key = r.workload_key "
            "AND t.target_key = r.target_key AND t.trial_index = r.picked_trial "
            "WHERE r.workload_key = ? AND r.target_key = ? "
            "ORDER BY r.finished_at DESC, r.run_id DESC",
            (workload_key, target_key),
        )
        for row in rows:
            rec = _row_to_record(row)
            if rec.ok and (where is None or where(rec)):
                return rec
        return None

    @_guarded
    def chosen(
        self,
        workload_key: str,
        target_key: str,
        where: Callable[[TrialRecord], bool] | None = None,
    ) -> TrialRecord | None:
        """The kernel to rebuild for (workload, target): :meth:`picked` when a run picked one
        (re-measured side by side with the other finalists), else :meth:`best` (the fastest
        tuning-time latency); ``None`` when there is no ok trial for which ``where`` holds."""
        return self.picked(workload_key, target_key, where) or self.best(
            workload_key, target_key, where
        )

    @_guarded
    def top(
        self,
        workload_key: str,
        target_key: str,
        k: int,
        where: Callable[[TrialRecord], bool] | None = None,
    ) -> list[TrialRecord]:
        """The ``k`` fastest ok trials of distinct assignments for which ``where`` (if given)
        is true, fastest first (ties: the earliest); fewer when fewer exist. These are the
        finalists a tune re-measures before it picks its kernel."""
        rows = self._db.execute(
            f"SELECT {_TRIAL_COLUMNS} FROM trials WHERE workload_key = ? AND target_key = ? "
            "AND error_kind IS NULL AND latency_s IS NOT NULL ORDER BY latency_s, trial_index",
            (workload_key, target_key),
        )
        out: list[TrialRecord] = []
        seen: set[str] = set()
        for row in rows:
            if len(out) >= k:
                break
            rec = _row_to_record(row)
            key = _canonical_json(rec.assignment)
            if rec.ok and key not in seen and (where is None or where(rec)):
                seen.add(key)
                out.append(rec)
        return out

    @_guarded
    def versions_of(self, workload_key: str, target_key: str) -> dict[int, dict[str, str]]:
        """The component versions (``heronlike``, ``tvm`` …, as given to :meth:`start_run`)
        of the run that recorded each trial of (workload, target), by trial index. Trials
        recorded outside a run (e.g. the failed builds of an offline round) are absent."""
        rows = self._db.execute(
            "SELECT t.trial_index, r.versions_json FROM trials t JOIN runs r "
            "ON t.run_id = r.run_id WHERE t.workload_key = ? AND t.target_key = ?",
            (workload_key, target_key),
        ).fetchall()
        return {int(i): json.loads(v) for i, v in rows}

    def split_by_version(
        self,
        workload_key: str,
        target_key: str,
        versions: Mapping[str, str],
        keys: tuple[str, ...] = VERSION_KEYS,
        *,
        after: int | None = None,
    ) -> tuple[list[TrialRecord], list[TrialRecord]]:
        """The trials of (workload, target) as ``(today's, foreign)``: foreign ones were
        recorded by a run whose version of any component in ``keys`` differs from
        ``versions``. A trial recorded outside a run counts as today's. ``after``: only trials
        whose index is greater (what other processes added since a tune last looked).

        A tune neither counts foreign trials toward its budget nor shows them to its explorer
        (their latencies were measured with other code), and reports how many it skipped.
        """
        by_index = self.versions_of(workload_key, target_key)
        today, foreign = [], []
        for rec in self.trials(workload_key, target_key, after=after):
            v = by_index.get(rec.trial_index)
            same = v is None or all(v.get(k) == versions.get(k) for k in keys)
            (today if same else foreign).append(rec)
        return today, foreign

    @_guarded
    def workloads(self) -> list[dict[str, Any]]:
        """One dict per (workload, target) known to the database, for listings.

        Keys: ``workload_key``, ``target_key``, ``description`` (empty if the pair was never
        registered but has trials), ``trials``, ``ok_trials``, ``best_latency_s`` (seconds, or
        ``None``). Sorted by description, then keys.
        """
        rows = self._db.execute(
            """
            WITH keys AS (
                SELECT workload_key, target_key FROM workloads
                UNION
                SELECT DISTINCT workload_key, target_key FROM trials
            )
            SELECT k.workload_key, k.target_key, COALESCE(w.description, ''),
                   COUNT(t.id),
                   COALESCE(SUM(CASE WHEN t.error_kind IS NULL AND t.latency_s IS NOT NULL
                                     THEN 1 ELSE 0 END), 0),
                   MIN(CASE WHEN t.error_kind IS NULL THEN t.latency_s END)
            FROM keys k
            LEFT JOIN workloads w
                   ON w.workload_key = k.workload_key AND w.target_key = k.target_key
            LEFT JOIN trials t
                   ON t.workload_key = k.workload_key AND t.target_key = k.target_key
            GROUP BY k.workload_key, k.target_key
            ORDER BY 3, 1, 2
            """
        ).fetchall()
        return [
            {
                "workload_key": wk,
                "target_key": tk,
                "description": desc,
                "trials": int(n),
                "ok_trials": int(n_ok),
                "best_latency_s": None if best is None else float(best),
            }
            for wk, tk, desc, n, n_ok, best in rows
        ]

    @_guarded
    def workload_info(self, workload_key: str, target_key: str) -> dict[str, Any] | None:
        """The registered description and compute text of (workload, target), or ``None``."""
        row = self._db.execute(
            "SELECT description, compute_text, created_at FROM workloads "
            "WHERE workload_key = ? AND target_key = ?",
            (workload_key, target_key),
        ).fetchone()
        if row is None:
            return None
        return {
            "workload_key": workload_key,
            "target_key": target_key,
            "description": row[0],
            "compute_text": row[1],
            "created_at": float(row[2]),
        }

    @_guarded
    def export_jsonl(self, path: str | os.PathLike[str]) -> int:
        """Write every trial as one JSON object per line to ``path``; return how many.

        Trials are ordered by workload key, target key, then trial index. Each object holds the
        :class:`TrialRecord` fields plus ``ok`` and ``run_id``.
        """
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        cur = self._db.execute(
            f"SELECT {_TRIAL_COLUMNS}, run_id FROM trials "
            "ORDER BY workload_key, target_key, trial_index"
        )
        n = 0
        with open(out, "w", encoding="utf-8") as fh:
            for row in cur:
                rec = _row_to_record(row[:-1])
                d = rec.to_json_dict()
                d["run_id"] = row[-1]
                fh.write(json.dumps(d, sort_keys=True) + "\n")
                n += 1
        return n

    # -- lifetime -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection. Every trial is already committed; closing twice is harmless."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Records:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._conn is None else "open"
        return f"Records({str(self.path)!r}, {state})"
