"""What a skeptical user tries (issue 9): kernels that skip initialisation, integer overflow in
the reference, corrupted and foreign records, stale assignments, kill -9 mid-batch, bad arguments.

Every tune here uses a float32 GEMM on ``dlboost -general`` (the general rule set), which runs on
any x86 CPU, with or without AVX512-VNNI.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import numpy as np
import pytest
import tvm
from tvm import te
from tvm.script import tirx as T

from heronlike import ops, tune
from heronlike.errors import InvalidArgumentError, RecordsMismatchError
from heronlike.measure import LocalRunner, RunInput
from heronlike.measure.check import poison
from heronlike.measure.kinds import ErrorKind
from heronlike.records import Records
from heronlike.reference import random_inputs, reference_outputs
from heronlike.space import generate_space
from heronlike.tuning import apply_best

REPO = Path(__file__).resolve().parents[1]
TARGET = "dlboost -general"
FAST = dict(number=1, repeat=2, min_repeat_ms=0.0, final_repeat=2)


# -- poisoned outputs: a kernel that never initialises its accumulator fails -------------------


def _matmul(dtype: str, init: bool) -> tvm.tirx.PrimFunc:
    """``C[i, j] (+)= A[i, k] * B[j, k]`` over 16×16×16, with or without zeroing C first."""

    @T.prim_func
    def with_init(
        A: T.Buffer((16, 16), dtype), B: T.Buffer((16, 16), dtype), C: T.Buffer((16, 16), dtype)
    ):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j in T.grid(16, 16):
            C[i, j] = T.cast(0, dtype)
            for k in range(16):
                C[i, j] = C[i, j] + A[i, k] * B[j, k]

    @T.prim_func
    def without_init(
        A: T.Buffer((16, 16), dtype), B: T.Buffer((16, 16), dtype), C: T.Buffer((16, 16), dtype)
    ):
        T.func_attr({"global_symbol": "main", "tirx.noalias": True})
        for i, j, k in T.grid(16, 16, 16):
            C[i, j] = C[i, j] + A[i, k] * B[j, k]

    return with_init if init else without_init


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_kernel_that_skips_initialisation_is_caught(tmp_path: Path, dtype: str) -> None:
    rng = np.random.default_rng(0)
    if dtype == "float32":
        a, b = (rng.uniform(-1, 1, (16, 16)).astype(dtype) for _ in range(2))
        expected = (a.astype(np.float64) @ b.T.astype(np.float64)).astype(dtype)
    else:
        a, b = (rng.integers(-100, 100, (16, 16)).astype(dtype) for _ in range(2))
        expected = a @ b.T
    np.savez(tmp_path / "args.npz", arg0=a, arg1=b, arg2=np.zeros((16, 16), dtype))
    np.savez(tmp_path / "expected.npz", arg2=expected)
    rtol = 1e-4 if dtype == "float32" else 0.0
    inputs = []
    for init in (True, False):
        so = tmp_path / f"init{init}.so"
        tvm.compile(tvm.IRModule({"main": _matmul(dtype, init)}), target="llvm").export_library(
            str(so)
        )
        inputs.append(
            RunInput(str(so), str(tmp_path / "args.npz"), str(tmp_path / "expected.npz"), rtol)
        )
    with LocalRunner(num_threads=1, number=1, repeat=2, min_repeat_ms=0) as runner:
        good, broken = runner.run(inputs)
    assert good.ok, good.error_msg
    # zero-filled outputs would have let it pass: the args file holds zeros for C
    assert broken.error_kind == ErrorKind.WRONG_RESULT == "wrong_result"
    assert "first call" in (broken.error_msg or "")


def test_poison_values() -> None:
    f = poison(np.zeros((3, 4), np.float16))
    assert f.dtype == np.float16 and np.isnan(f).all()
    i = poison(np.zeros((64,), np.int32))
    assert i.dtype == np.int32 and np.count_nonzero(i) > 60 and len(set(i.tolist())) > 60
    assert np.array_equal(i, poison(np.zeros((64,), np.int32)))  # reproducible
    u = poison(np.zeros((8, 8), np.uint8))
    assert u.dtype == np.uint8 and u.shape == (8, 8)


# -- integer references wrap like the hardware ---------------------------------------------------


def test_int16_reference_is_exact_with_wraparound() -> None:
    """int16 × int16 summed over K = 8191 passes 2^31: the reference must wrap as an int32
    accumulator does (the old float path overflowed and failed every candidate)."""
    M, N, K = 4, 4, 8191
    X = te.placeholder((M, K), "int16", name="X")
    W = te.placeholder((N, K), "int16", name="W")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute(
        (M, N), lambda i, j: te.sum(X[i, k].astype("int32") * W[j, k].astype("int32"), axis=k)
    )
    space = generate_space([X, W, C], TARGET)
    arrays = random_inputs(space.logical, np.random.default_rng(0))
    arrays[0][:] = -(2**15)  # every product is 2^30: the sum is 8191·2^30, far past int32
    arrays[1][:] = -(2**15)
    with np.errstate(all="raise"):
        got = reference_outputs(space.logical, arrays)[2]
    ex = tvm.compile(tvm.IRModule({"main": space.logical.func}), target="llvm")
    tensors = [tvm.runtime.tensor(a) for a in arrays]
    ex["main"](*tensors)
    assert got.dtype == np.int32
    assert np.array_equal(got, tensors[2].numpy())
    assert (got == np.int64(K * 2**30).astype(np.int32)).all()  # 3·2^30 wraps to -2^30
    assert (got == -(2**30)).all()


# -- records: corrupted, foreign, stale ------------------------------------------------------------


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Records of a 4-trial float32 GEMM tune."""
    path = tmp_path_factory.mktemp("tuned") / "records.sqlite"
    r = tune(ops.gemm(32, 32, 32, "float32"), TARGET, trials=4, batch_size=4, records=path, **FAST)
    assert r.valid >= 1 and r.correct
    return path


def test_garbage_records_file_raises_typed_error(tmp_path: Path) -> None:
    path = tmp_path / "garbage.sqlite"
    path.write_bytes(b"not a database at all" * 100)
    with pytest.raises(RecordsMismatchError, match=str(path)):
        Records(path)
    with pytest.raises(RecordsMismatchError, match=str(path)):
        tune(ops.gemm(32, 32, 32, "float32"), TARGET, trials=2, records=path, **FAST)


def test_corrupted_records_page_raises_typed_error(tuned: Path, tmp_path: Path) -> None:
    path = tmp_path / "corrupt.sqlite"
    shutil.copy(tuned, path)
    data = bytearray(path.read_bytes())
    page = 4096
    assert len(data) > 3 * page
    data[page + 100 : 3 * page - 100] = b"\xa5" * (2 * page - 200)  # damage pages 2 and 3
    path.write_bytes(bytes(data))
    with pytest.raises(RecordsMismatchError, match="corrupt"):
        with Records(path) as db:
            db.trials("x", "y")


def _set_versions(path: Path, **versions: str) -> None:
    con = sqlite3.connect(path)
    with con:
        for run_id, text in con.execute("SELECT run_id, versions_json FROM runs").fetchall():
            v = json.loads(text) | versions
            con.execute(
                "UPDATE runs SET versions_json = ? WHERE run_id = ?", (json.dumps(v), run_id)
            )
    con.close()


def test_trials_of_another_version_do_not_count(tuned: Path, tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    shutil.copy(tuned, path)
    _set_versions(path, heronlike="0.0.1")
    with pytest.warns(UserWarning, match="4 trials .* heronlike 0.0.1"):
        r = tune(
            ops.gemm(32, 32, 32, "float32"), TARGET, trials=4, batch_size=4, records=path, **FAST
        )
    assert r.foreign_trials == 4 and r.trials_run == 4 and r.trials == 4
    with Records(path) as db:
        indices = [t.trial_index for t in db.trials(r.workload_key, r.target_key)]
    assert indices == list(range(8))  # the old ones are kept, the new ones appended


def test_apply_best_skips_an_assignment_that_no_longer_fits(tuned: Path, tmp_path: Path) -> None:
    path = tmp_path / "stale.sqlite"
    shutil.copy(tuned, path)
    compute = ops.gemm(32, 32, 32, "float32")
    space = generate_space(compute, TARGET)
    con = sqlite3.connect(path)
    with con:  # every stored assignment gets a variable today's space does not have
        for tid, text in con.execute("SELECT id, assignment_json FROM trials").fetchall():
            a = json.loads(text) | {"retired_knob": 3}
            con.execute("UPDATE trials SET assignment_json = ? WHERE id = ?", (json.dumps(a), tid))
    con.close()
    with pytest.raises(RecordsMismatchError, match="no longer fits.*retired_knob"):
        apply_best(path, compute, TARGET)
    assert space.misfits({**{v: 1 for v in space.csp.vars}})  # ranges and constraints checked
    with pytest.raises(RecordsMismatchError, match="no such records file"):
        apply_best(tmp_path / "missing.sqlite", compute, TARGET)


# -- kill -9 mid-batch -------------------------------------------------------------------------


def test_kill_mid_batch_loses_at_most_the_trial_in_flight(tmp_path: Path) -> None:
    sys.path.insert(0, str(REPO))
    from benchmarks.kill_resume import run_kills

    # killed after 3 runs of the first batch, then 4 runs later (1 into the second batch)
    rows, final = run_kills(tmp_path, kills=2, trials=12, batch=6, n=32, points=[3, 4])
    assert rows and all(r["lost"] <= r["in_flight"] for r in rows), rows
    # the first kill lands inside the first batch (a run takes 40 ms): its finished trials are
    # kept (the old batch-at-a-time commit kept none); the run whose log line was written but
    # whose commit had not happened yet is the trial in flight
    assert rows[0]["committed"] in (2, 3, 4), rows
    # a trial lost by one kill is measured again by the next round, so losses add up by kill
    assert all(r["committed"] >= r["ran"] - (r["kill"] + 1) * r["in_flight"] for r in rows), rows
    assert rows[-1]["lost_total"] == sum(r["lost"] for r in rows), rows
    assert final["returncode"] == 0, final["stderr"]
    assert final["trials"] == 12 and final["indices_ok"] and final["duplicates"] == 0


# -- bad arguments: typed errors naming the argument, nothing recorded -----------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"trials": 0}, "trials"),
        ({"trials": 2.5}, "trials"),
        ({"trials": None}, "time_budget_s"),
        ({"batch_size": 0}, "batch_size"),
        ({"number": 0}, "number"),
        ({"repeat": -1}, "repeat"),
        ({"min_repeat_ms": float("nan")}, "min_repeat_ms"),
        ({"run_timeout_s": 0}, "run_timeout_s"),
        ({"time_budget_s": -5.0}, "time_budget_s"),
        ({"seed": -1}, "seed"),
        ({"explorer_options": {"no_such_option": 1}}, "explorer_options"),
        ({"explorer_options": [1, 2]}, "explorer_options"),
        ({"progress": "print"}, "progress"),
    ],
)
def test_bad_arguments_raise_typed_errors(tmp_path: Path, kwargs: dict, name: str) -> None:
    records = tmp_path / "records.sqlite"
    with pytest.raises(InvalidArgumentError, match=name):
        tune(ops.gemm(32, 32, 32, "float32"), TARGET, records=records, **kwargs)
    assert not records.exists()


def test_records_of_wrong_type(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="records"):
        tune(ops.gemm(32, 32, 32, "float32"), TARGET, trials=2, records=3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["tune", "gemm", "--shape", "64,64,64", "--trials", "0"], "trials"),
        (["tune", "gemm", "--shape", "64,64,64", "--batch-size", "0"], "batch"),
        (["tune", "gemm", "--shape", "64,x"], "64,x"),
        (["tune", "gemm", "--shape", "64,64,64", "--target", "tpu9000"], "tpu9000"),
    ],
)
def test_cli_bad_input_prints_one_line_no_traceback(
    tmp_path: Path, argv: list, needle: str, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    # the console script's entry point in this process (tests/test_cli.py runs the installed
    # script itself): exit status 2, the argument named on stderr, nothing recorded
    from heronlike import cli

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["heronlike", *argv, "--records", str(tmp_path / "r.sqlite")])
    with pytest.raises(SystemExit) as exit_:
        cli.run()
    out = capsys.readouterr()
    assert exit_.value.code == 2, out.err
    assert "Traceback" not in out.err + out.out
    assert needle in out.err
    assert not (tmp_path / "r.sqlite").exists()


def test_error_kinds_are_stored_as_their_values(tuned: Path) -> None:
    assert [k.value for k in ErrorKind][:3] == ["schedule", "build", "build_timeout"]
    con = sqlite3.connect(tuned)
    kinds = {k for (k,) in con.execute("SELECT DISTINCT typeof(error_kind) FROM trials")}
    con.close()
    assert kinds <= {"null", "text"}
