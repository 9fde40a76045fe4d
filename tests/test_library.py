"""Kernel libraries (issue 11): the task scheduler, ``heronlike.library.build`` with resume and
reuse, the exported shared library loaded in a fresh process and called from C, records merge.

One module fixture builds a tiny library for target ``llvm`` (a small int8 convolution and an
int8 GEMM, 12 trials in total, batch 4): first interrupted after its first round (a
``KeyboardInterrupt`` from the progress callback, as a Ctrl-C would), then run again to the end.
Every kernel is then checked bit-exact against numpy in a fresh Python process and from a C
program through the TVM runtime.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from heronlike import ops
from heronlike.errors import HeronlikeError, InvalidArgumentError
from heronlike.library import KernelNotFoundError, build, load, load_operator_list, merge
from heronlike.records import Records
from heronlike.scheduler import Task, TaskScheduler

TARGET = "llvm"
BUDGET = 12
BATCH = 4
OPS = [
    {
        "op": "conv2d",
        "shape": {"N": 1, "H": 8, "W": 8, "CI": 16, "CO": 16, "KH": 3, "KW": 3, "pad": 1},
        "dtype": "int8",
        "occurrences": 3,
    },
    {"op": "gemm", "shape": {"M": 8, "N": 32, "K": 64}, "dtype": "int8", "occurrences": 1},
]


def _trials(path: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT workload_key, target_key, trial_index, assignment_json, latency_s, created_at "
            "FROM trials ORDER BY id"
        ).fetchall()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("library")
    records = tmp / "records.sqlite"
    rounds: list[Any] = []

    def interrupt(info: Any) -> None:
        rounds.append(info)
        raise KeyboardInterrupt  # as a Ctrl-C after the first round

    with pytest.raises(KeyboardInterrupt):
        build(OPS, TARGET, trials=BUDGET, out_dir=tmp / "lib", records=records,
              batch_size=BATCH, progress=interrupt)  # fmt: skip
    first = _trials(records)
    res = build(OPS, TARGET, trials=BUDGET, out_dir=tmp / "lib", records=records, batch_size=BATCH)
    return {"tmp": tmp, "records": records, "first": first, "rounds": rounds, "result": res}


# -- the scheduler and resume -----------------------------------------------------------------


def test_interrupted_build_resumes_without_loss_or_repeats(built: dict[str, Any]) -> None:
    first, res = built["first"], built["result"]
    assert len(first) == BATCH and len(built["rounds"]) == 1
    now = _trials(built["records"])
    assert now[: len(first)] == first  # nothing of the first run lost or changed
    assert len(now) == BUDGET  # the total budget, counting the first run's trials
    assert res.schedule is not None and res.schedule.trials_run == BUDGET - BATCH
    by_task: dict[str, list[Any]] = {}
    for wk, _tk, idx, assignment, _lat, _t in now:
        by_task.setdefault(wk, []).append((idx, assignment))
    for rows in by_task.values():
        assert [i for i, _ in rows] == list(range(len(rows)))  # contiguous trial indices
        assert len({a for _, a in rows}) == len(rows)  # no candidate measured twice
    assert res.schedule.allocation() == {
        t.name: len(by_task[t.workload_key]) for t in res.schedule.tasks
    }


def test_rerun_of_a_finished_build_measures_nothing(built: dict[str, Any]) -> None:
    before = _trials(built["records"])
    again = build(OPS, TARGET, trials=BUDGET, out_dir=built["tmp"] / "again",
                  records=built["records"], batch_size=BATCH)  # fmt: skip
    assert again.schedule is not None and again.schedule.trials_run == 0
    assert _trials(built["records"]) == before
    same = {k["function"]: k["records"]["trial_index"] for k in again.manifest["kernels"]}
    assert same == {
        k["function"]: k["records"]["trial_index"] for k in built["result"].manifest["kernels"]
    }


def test_gradient_picks_the_largest_expected_gain(tmp_path: Path) -> None:
    tasks = [Task("small", ops.gemm(16, 16, 16), 1), Task("big", ops.gemm(32, 16, 16), 10)]
    sched = TaskScheduler(tasks, TARGET, trials=40, records=tmp_path / "r.sqlite",
                          batch_size=4, epsilon=0.0)  # fmt: skip
    sched._inflight = {}
    assert sched._pick(0) == (0, 4, False)  # warm-up: every task first, in order
    for s, lat in zip(sched.states, (1e-3, 1e-3), strict=True):
        s.history, s.best_latency_s, s.trials = [lat], lat, 4
    assert sched._pick(0)[0] == 1  # weight 10 x same latency
    sched.states[0].best_latency_s = sched.states[0].history[0] = 20e-3
    assert sched._pick(0)[0] == 0  # 1 x 20 ms > 10 x 1 ms
    sched.states[0].finished = True
    assert sched._pick(0)[0] == 1
    even = TaskScheduler(tasks, TARGET, trials=10, strategy="even", records=tmp_path / "r.sqlite")
    even._inflight = {}
    assert [even._quota(i) for i in range(2)] == [5, 5]
    for s in even.states:
        s.history, s.trials = [1e-3], 5
    assert even._pick(0) is None  # each got its even share


def test_scheduler_rejects_bad_input(tmp_path: Path) -> None:
    task = Task("g", ops.gemm(16, 16, 16), 1)
    with pytest.raises(InvalidArgumentError, match="trials"):
        TaskScheduler([task], TARGET, trials=0, records=tmp_path / "r.sqlite")
    with pytest.raises(InvalidArgumentError, match="strategy"):
        TaskScheduler([task], TARGET, trials=4, strategy="fast", records=tmp_path / "r.sqlite")
    with pytest.raises(InvalidArgumentError, match="same workload"):
        TaskScheduler([task, Task("g2", ops.gemm(16, 16, 16))], TARGET, trials=4,
                      records=tmp_path / "r.sqlite")  # fmt: skip


# -- the library in a fresh process, and from C -----------------------------------------------

FRESH = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    import heronlike.library as hl

    def conv_ref(x, w, s, p):
        n, h, wd, ci = x.shape; co, kh, kw, _ = w.shape
        xp = np.pad(x.astype(np.int64), ((0, 0), (p, p), (p, p), (0, 0)))
        ho, wo = (h + 2 * p - kh) // s + 1, (wd + 2 * p - kw) // s + 1
        y = np.zeros((n, ho, wo, co), np.int64)
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, i:i + s * (ho - 1) + 1:s, j:j + s * (wo - 1) + 1:s, :]
                y += np.tensordot(patch, w[:, i, j, :].astype(np.int64), axes=([3], [1]))
        return y.astype(np.int32)

    lib = hl.load(sys.argv[1])
    rng = np.random.default_rng(7)
    out = {"modules": sorted(m for m in sys.modules if m.startswith("heronlike.")), "ok": {}}
    for k in lib.kernels:
        a = rng.integers(0, 255, k.inputs[0].shape, dtype=np.uint8, endpoint=True)
        b = rng.integers(-128, 127, k.inputs[1].shape, dtype=np.int8, endpoint=True)
        if k.op == "conv2d":
            got = lib.conv2d(a, b, stride=k.attrs["stride"], padding=k.attrs["pad"])
            want = conv_ref(a, b, k.attrs["stride"], k.attrs["pad"])
        else:
            got = lib.gemm(a, b)
            want = (a.astype(np.int64) @ b.astype(np.int64).T).astype(np.int32)
        out["ok"][k.op] = bool(got.dtype == want.dtype and np.array_equal(got, want))
    try:
        lib.gemm(np.zeros((3, 64), np.uint8), np.zeros((32, 64), np.int8))
    except hl.KernelNotFoundError as e:
        out["missing"] = [type(e).__name__, str(e), list(e.available)]
    print(json.dumps(out))
    """
)


def test_fresh_process_loads_and_every_kernel_is_bit_exact(built: dict[str, Any]) -> None:
    lib_dir = built["tmp"] / "lib"
    assert (lib_dir / "kernels.so").is_file() and built["result"].checked is True
    proc = subprocess.run(
        [sys.executable, "-c", FRESH, str(lib_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "TVM_NUM_THREADS": "2"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ok"] == {"conv2d": True, "gemm": True}
    name, message, available = out["missing"]
    assert name == "KernelNotFoundError"
    assert "uint8[3, 64]" in message and "gemm(X uint8[8, 64], W int8[32, 64])" in message
    assert available == ["gemm(X uint8[8, 64], W int8[32, 64])"]
    # the dispatcher needs no tuning stack: no rules, sessions or records were imported
    assert not {"heronlike.session", "heronlike.space", "heronlike.records"} & set(out["modules"])


def test_manifest_names_everything(built: dict[str, Any]) -> None:
    import tvm

    m = json.loads((built["tmp"] / "lib" / "manifest.json").read_text())
    assert m["format"] == "heronlike-library" and m["library"] == "kernels.so"
    assert m["versions"]["tvm"] == tvm.__version__ and m["versions"]["heronlike"]
    assert m["target"].startswith("dlboost -general") and m["checked"] is True
    with Records(built["records"]) as db:
        for k in m["kernels"]:
            assert {"function", "op", "shape", "dtype", "layout", "latency_s", "records"} <= set(k)
            key = k["records"]
            best = db.trials(key["workload_key"], key["target_key"])[key["trial_index"]]
            assert best.ok and best.latency_s == k["latency_s"] > 0
            assert key["target_key"] == m["target"] and k["checked"] is True
    est = sum(k["occurrences"] * k["latency_s"] for k in m["kernels"])
    assert m["estimate_s"] == pytest.approx(est)


def test_kernel_not_found_is_a_typed_error(built: dict[str, Any]) -> None:
    lib = load(built["tmp"] / "lib")
    x = np.zeros((1, 8, 8, 16), np.uint8)
    w = np.zeros((16, 3, 3, 16), np.int8)
    with pytest.raises(KernelNotFoundError, match="stride=2") as err:
        lib.conv2d(x, w, stride=2, padding=1)
    assert isinstance(err.value, HeronlikeError) and isinstance(err.value, ValueError)
    with pytest.raises(KernelNotFoundError, match="no kernel"):
        lib.conv2d(x.astype(np.int8), w, stride=1, padding=1)  # int8 activations: no kernel
    with pytest.raises(AttributeError):
        lib.c3d  # noqa: B018


def _c_compiler() -> tuple[str, Path] | None:
    cc = shutil.which("cc") or shutil.which("gcc")
    site = Path(sysconfig.get_paths()["purelib"])
    if cc is None or not (site / "tvm_ffi/include/tvm/ffi/c_api.h").is_file():
        return None
    if not (site / "tvm/lib/libtvm_runtime.so").is_file():
        return None
    return cc, site


def test_kernels_called_from_c_through_the_tvm_runtime(built: dict[str, Any]) -> None:
    found = _c_compiler()
    if found is None:
        pytest.skip("no C compiler, or the tvm / tvm_ffi wheels lack headers or libraries")
    cc, site = found
    import heronlike.library as hl

    tmp = built["tmp"] / "c"
    tmp.mkdir(exist_ok=True)
    exe = tmp / "call_kernel"
    src = Path(hl.__file__).parent / "call_kernel.c"
    libs = [site / "tvm_ffi/lib", site / "tvm/lib"]
    subprocess.run(
        [cc, "-O1", str(src), "-o", str(exe), f"-I{site / 'tvm_ffi/include'}"]
        + [f"-L{p}" for p in libs]
        + ["-Wl,--no-as-needed", "-ltvm_ffi", "-ltvm_runtime"]
        + [f"-Wl,-rpath,{p}" for p in libs],
        check=True,
        capture_output=True,
    )
    lib = load(built["tmp"] / "lib")
    rng = np.random.default_rng(3)
    for k in lib.kernels:
        calls: list[str] = []
        kernel_args: list[str] = []
        inputs = []
        for p in k.params:
            f = tmp / f"{p.name}.bin"
            dims = "x".join(map(str, p.kernel_shape))
            if p.role == "output":
                out_file, out_param = tmp / "out.bin", p
                kernel_args.append(f"out:{out_file}:{p.dtype}:{dims}")
                continue
            ii = np.iinfo(p.dtype)
            a = rng.integers(ii.min, ii.max, p.shape, dtype=p.dtype, endpoint=True)
            inputs.append(a)
            assert p.shape == p.kernel_shape  # no padding at these shapes
            a.tofile(f)
            if p.pack:
                packed = f"{tmp / (p.name + '.packed')}:{p.dtype}:" + "x".join(
                    map(str, p.packed_shape)
                )
                calls += [p.pack, f"in:{f}:{p.dtype}:{dims}", f"out:{packed}", "--"]
                kernel_args.append(f"in:{packed}")
            else:
                kernel_args.append(f"in:{f}:{p.dtype}:{dims}")
        proc = subprocess.run(
            [str(exe), str(lib.path / "kernels.so"), *calls, k.function, *kernel_args],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "TVM_NUM_THREADS": "2"},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        got = np.fromfile(out_file, dtype=out_param.dtype).reshape(out_param.shape)
        want = hl.numpy_reference(hl.Workload(k.op, tuple(k.attrs.items()), k.dtype), inputs)
        assert np.array_equal(got, want), k.function


# -- reuse: versions, targets, merge -----------------------------------------------------------


def test_foreign_version_records_are_skipped_with_a_warning(built: dict[str, Any]) -> None:
    tmp = built["tmp"]
    old = tmp / "old_version.sqlite"
    merge([built["records"]], old)
    with sqlite3.connect(old) as conn:
        rows = conn.execute("SELECT run_id, versions_json FROM runs").fetchall()
        for run_id, text in rows:
            v = json.loads(text)
            v["heronlike"] = "0.0.0-old"
            conn.execute("UPDATE runs SET versions_json = ? WHERE run_id = ?",
                         (json.dumps(v), run_id))  # fmt: skip
    with pytest.warns(UserWarning, match="another heronlike or TVM version"):
        with pytest.raises(InvalidArgumentError, match="nothing to export"):
            build(OPS, TARGET, trials=0, out_dir=tmp / "old", records=old)


def test_other_target_records_are_skipped_with_a_warning(built: dict[str, Any]) -> None:
    with pytest.warns(UserWarning, match="other targets are skipped"):
        with pytest.raises(InvalidArgumentError, match="nothing to export"):
            build(OPS, "llvm -mcpu=haswell", trials=0, out_dir=built["tmp"] / "hsw",
                  records=built["records"])  # fmt: skip


def test_merge_from_two_machines_then_reuse(built: dict[str, Any]) -> None:
    tmp = built["tmp"]
    other = tmp / "machine_b.sqlite"
    shutil.copy(built["records"], other)
    with sqlite3.connect(other) as conn:  # machine B: another CPU, so another target key
        conn.execute("UPDATE trials SET target_key = 'dlboost -general -mcpu=machine-b'")
        conn.execute("UPDATE workloads SET target_key = 'dlboost -general -mcpu=machine-b'")
    out = tmp / "merged.sqlite"
    s = merge([built["records"], other], out)
    assert s.added == {str(built["records"]): BUDGET, str(other): BUDGET}
    again = merge([built["records"], other], out)  # idempotent
    assert sum(again.added.values()) == 0 and sum(again.skipped.values()) == 2 * BUDGET
    with Records(out) as db:
        assert len(db.workloads()) == 4
        for w in db.workloads():
            v = db.versions_of(w["workload_key"], w["target_key"])
            assert len(v) == w["trials"]  # every trial kept its run (and versions)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # machine B's records: another target
        res = build(OPS, TARGET, trials=0, out_dir=tmp / "from_merged", records=out)
    assert res.schedule is None and res.checked is True and not res.missing
    assert [k["latency_s"] for k in res.manifest["kernels"]] == [
        k["latency_s"] for k in built["result"].manifest["kernels"]
    ]


def test_cli_merge_and_show(built: dict[str, Any]) -> None:
    from click.testing import CliRunner

    from heronlike.cli import main

    out = built["tmp"] / "cli_merged.sqlite"
    r = CliRunner().invoke(main, ["library", "merge", str(built["records"]), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert f"{BUDGET} trials added" in r.output
    r = CliRunner().invoke(main, ["library", "show", str(built["tmp"] / "lib")])
    assert r.exit_code == 0, r.output
    assert "hl_conv2d_0" in r.output and "hl_gemm_1" in r.output
    model = built["tmp"] / "model.json"
    model.write_text(json.dumps(OPS))
    args = ["library", "build", str(model), "--target", TARGET, "--trials", "0"]
    args += ["--records", str(out), "--out", str(built["tmp"] / "cli_lib")]
    r = CliRunner().invoke(main, args)  # export from the merged records, no tuning
    assert r.exit_code == 0, r.output
    assert "bit-exact" in r.output and "model estimate" in r.output
    assert load(built["tmp"] / "cli_lib").find("gemm", np.zeros((8, 64), np.uint8),
                                               np.zeros((32, 64), np.int8))  # fmt: skip


# -- operator lists ------------------------------------------------------------------------------


def test_operator_lists(tmp_path: Path) -> None:
    f = tmp_path / "model.json"
    f.write_text(json.dumps({"operators": OPS + [OPS[1]]}))
    ws = load_operator_list(f)
    assert [w.op for w in ws] == ["conv2d", "gemm", "gemm"]
    assert ws[0].params["stride"] == 1 and ws[0].params["dilation"] == 1  # defaults
    from heronlike.library.workloads import merge_duplicates

    assert [w.occurrences for w in merge_duplicates(ws)] == [3, 2]
    r50 = load_operator_list("resnet50", batch=2)
    assert len(r50) == 21 and sum(w.occurrences for w in r50) == 54
    assert all(w.params["N" if w.op == "conv2d" else "M"] == 2 for w in r50)
    bert = load_operator_list("bert", batch=2)
    assert [w.params["B"] for w in bert] == [2, 24, 24]
    assert len(load_operator_list("vgg16")) == 10
    with pytest.raises(InvalidArgumentError, match="unknown operator"):
        load_operator_list([{"op": "softmax", "shape": [1]}])
    with pytest.raises(InvalidArgumentError, match="unknown shape argument"):
        load_operator_list([{"op": "gemm", "shape": {"M": 1, "N": 2, "K": 3, "Q": 4}}])
    with pytest.raises(InvalidArgumentError, match="no operator list"):
        load_operator_list("no_such_model")


# -- other targets: VNNI packing ------------------------------------------------------------------


def test_vnni_library_exports_here_and_its_weight_packing_is_exact(tmp_path: Path) -> None:
    """The DL Boost (VNNI) kernels cannot run on this CPU, but the library compiles, and the
    tiled weight packing its pack functions do equals the layout's own numpy packing."""
    import tvm

    from heronlike.library.builder import _pack_function, export
    from heronlike.library.workloads import Workload
    from heronlike.records import TrialRecord
    from heronlike.sampler import RandSAT
    from heronlike.space import generate_space
    from heronlike.template import PackedLayout

    target = "dlboost -mcpu=sapphirerapids -num-cores=2"
    entries = []
    gemm = Workload.create("gemm", {"M": 16, "N": 64, "K": 64})
    for w in (gemm, Workload.create(**OPS[0])):
        space = generate_space(w.compute(target), target)
        assert space.packed  # the VNNI weight layout
        a = RandSAT(space.csp, seed=1).sample(1)[0]
        rec = TrialRecord(space.workload_key, space.target.key, a, 1e-3, None, None,
                          0.0, 0.0, 0.0, 0.0, 0, "random", 0)  # fmt: skip
        entries.append((w, space, rec))
    m = export(entries, tmp_path / "vnni", records="-")
    assert (tmp_path / "vnni" / "kernels.so").is_file() and m["target"].startswith("dlboost")
    assert [p["packed_shape"] for p in m["kernels"][0]["params"]][1] == [4, 16, 16, 4]
    for layout, shape in ((PackedLayout((16, 4), (0, 1)), (64, 32)),
                          (PackedLayout((16, 1, 1, 4), (0, 3)), (32, 3, 3, 16))):  # fmt: skip
        f = _pack_function(shape, "int8", layout, "pack")
        ex = tvm.compile(tvm.IRModule({"pack": f}), target="llvm")
        w = np.random.default_rng(0).integers(-128, 127, shape, dtype=np.int8)
        dst = tvm.runtime.tensor(np.zeros(layout.packed_shape(shape), np.int8))
        ex["pack"](tvm.runtime.tensor(w), dst)
        assert np.array_equal(dst.numpy(), layout.pack(w))
