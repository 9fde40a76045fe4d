"""Offline measurement bundles (heronlike.measure.bundle and the standalone run_bundle.py).

Nothing here needs a GPU or nvcc: candidate folders hold dummy cubin bytes and hand-written
manifests, run_bundle.py runs with ``--standin`` (launches nothing), and the script's data and
reference functions are checked against direct numpy computations. The GPU path (CuPy loading
and timing, the PyTorch baselines) cannot run here.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

pytest.importorskip("tvm")

from click.testing import CliRunner  # noqa: E402

from heronlike import cli  # noqa: E402
from heronlike.errors import BundleError, HeronlikeError  # noqa: E402
from heronlike.measure.bundle import (  # noqa: E402
    BundleRunner,
    import_results,
    load_bundle,
    read_results,
    write_bundle,
)
from heronlike.measure.runner import RunInput  # noqa: E402
from heronlike.records import Records  # noqa: E402

CUBIN_BYTES = b"\x7fELF" + bytes(range(256)) * 8  # 2 KiB of not-a-cubin

M, N, K = 128, 64, 64  # kernel shapes; the logical M is 120 (padded by the kernel)


def _workload(key: str = "wk_gemm", seed: int = 7) -> dict:
    return {
        "workload_key": key,
        "target_key": "cuda -arch=sm_90",
        "params": [
            {
                "name": "A",
                "shape": [M, K],
                "dtype": "float16",
                "role": "input",
                "logical_shape": [120, K],
            },
            {"name": "B", "shape": [N, K], "dtype": "float16", "role": "input"},
            {
                "name": "C",
                "shape": [M, N],
                "dtype": "float32",
                "role": "output",
                "logical_shape": [120, N],
            },
        ],
        "reference": {"kind": "einsum", "spec": "mk,nk->mn", "operands": [0, 1], "output": 2},
        "seed": seed,
        "rtol": 1e-2,
        "atol": 1e-2,
        "flop": 2.0 * 120 * N * K,
        "label": "gemm 120x64x64 fp16",
    }


def _manifest(args: list[int] | None = None) -> dict:
    return {
        "arch": "sm_90",
        "launches": [
            {
                "kernel": "main_kernel",
                "grid": [4, 2, 1],
                "block": [128, 1, 1],
                "dynamic_shared_bytes": 18944,
                "args": args if args is not None else [2, 0, 1],
            },
        ],
        "kernels": {
            "main_kernel": {
                "registers": 128,
                "spill_stores_bytes": 0,
                "spill_loads_bytes": 0,
                "static_shared_bytes": 0,
                "stack_bytes": 0,
            },
        },
        "params": [
            {"name": "A", "shape": [M, K], "dtype": "float16"},
            {"name": "B", "shape": [N, K], "dtype": "float16"},
            {"name": "C", "shape": [M, N], "dtype": "float32"},
        ],
    }


def _artifact(tmp: Path, name: str, manifest: dict | None = None) -> Path:
    folder = tmp / "built" / f"{name}.cuda"
    folder.mkdir(parents=True)
    (folder / "kernel.cubin").write_bytes(CUBIN_BYTES)
    (folder / "kernel.cu").write_text('extern "C" __global__ void main_kernel() {}\n')
    (folder / "manifest.json").write_text(json.dumps(manifest or _manifest()))
    return folder


def _candidates(tmp: Path, n: int = 3, broken: int | None = None) -> list[dict]:
    out = []
    for i in range(n):
        manifest = _manifest(args=[2, 0]) if i == broken else None  # B is never passed
        out.append(
            {
                "id": f"cand_{i:04d}",
                "workload_key": "wk_gemm",
                "artifact_dir": str(_artifact(tmp, f"cand_{i:04d}", manifest)),
                "assignment": {"tile_m": 16 * (i + 1), "tile_n": 32},
                "build_s": 0.5 + i,
            }
        )
    return out


def _bundle(tmp: Path, n: int = 3, broken: int | None = None, **kw) -> Path:
    kw.setdefault("repeat", 7)
    kw.setdefault("warmup", 2)
    kw.setdefault("flush_l2_bytes", 1 << 20)
    return write_bundle(tmp / "bundle", [_workload()], _candidates(tmp, n, broken), **kw)


def _run_script(bundle: Path, *args: str, env: dict | None = None, timeout: float = 120):
    return subprocess.run(
        [sys.executable, str(bundle / "run_bundle.py"), str(bundle), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture(scope="module")
def rb() -> ModuleType:
    """run_bundle.py imported from its file, as the GPU machine would see it."""
    path = Path(__file__).parents[1] / "heronlike" / "measure" / "run_bundle.py"
    spec = importlib.util.spec_from_file_location("run_bundle_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- write_bundle --------------------------------------------------------------------------------


def test_write_bundle_layout_and_size(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    assert sorted(p.name for p in bundle.iterdir()) == ["bundle.json", "cands", "run_bundle.py"]
    script = Path(__file__).parents[1] / "heronlike" / "measure" / "run_bundle.py"
    assert (bundle / "run_bundle.py").read_bytes() == script.read_bytes()
    for i in range(3):
        cand = bundle / "cands" / f"cand_{i:04d}"
        assert sorted(p.name for p in cand.iterdir()) == [
            "kernel.cu",
            "kernel.cubin",
            "manifest.json",
        ]
        assert (cand / "kernel.cubin").read_bytes() == CUBIN_BYTES
    meta = json.loads((bundle / "bundle.json").read_text())
    assert meta["format"] == 1 and len(meta["id"]) == 32
    assert meta["created"].endswith("+00:00") and meta["heronlike_version"]
    assert meta["policy"] == {
        "repeat": 7,
        "warmup": 2,
        "number": 1,
        "flush_l2_bytes": 1 << 20,
        "timeout_s": 120.0,
        "baselines": True,
    }
    (w,) = meta["workloads"]
    assert w["params"][1]["logical_shape"] == [N, K]  # filled in
    assert w["params"][0]["logical_shape"] == [120, K]
    c = meta["candidates"][1]
    assert c["id"] == "cand_0001" and c["assignment"] == {"tile_m": 32, "tile_n": 32}
    assert c["build_s"] == 1.5 and c["manifest"] == _manifest()
    assert load_bundle(bundle)["id"] == meta["id"]
    # small: the files themselves plus a few KiB of JSON; no input data travels
    total = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    payload = 3 * (len(CUBIN_BYTES) + 64 + len(json.dumps(_manifest(), indent=1)))
    assert total < payload + script.stat().st_size + 16 * 1024, total


def test_write_bundle_rejects_bad_input(tmp_path: Path) -> None:
    cands = _candidates(tmp_path, 2)
    wl = [_workload()]
    with pytest.raises(BundleError, match="duplicate candidate id"):
        write_bundle(tmp_path / "b1", wl, [cands[0], cands[0]])
    with pytest.raises(BundleError, match="unknown workload_key"):
        write_bundle(tmp_path / "b2", wl, [{**cands[0], "workload_key": "nope"}])
    with pytest.raises(BundleError, match="candidate id"):
        write_bundle(tmp_path / "b3", wl, [{**cands[0], "id": "../evil"}])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(BundleError, match="no kernel.cubin"):
        write_bundle(tmp_path / "b4", wl, [{**cands[0], "artifact_dir": str(empty)}])
    bad = _workload()
    bad["reference"] = {**bad["reference"], "operands": [0, 2]}
    with pytest.raises(BundleError, match="reference operands"):
        write_bundle(tmp_path / "b5", [bad], [])
    with pytest.raises(BundleError, match="missing 'seed'"):
        write_bundle(tmp_path / "b6", [{k: v for k, v in bad.items() if k != "seed"}], [])
    bundle = write_bundle(tmp_path / "b7", wl, cands)
    with pytest.raises(BundleError, match="not empty"):
        write_bundle(bundle, wl, cands)
    first = load_bundle(bundle)["id"]
    assert load_bundle(write_bundle(bundle, wl, cands[:1], overwrite=True))["id"] != first
    assert isinstance(BundleError("x"), HeronlikeError) and isinstance(BundleError("x"), ValueError)


# -- run_bundle.py --standin ---------------------------------------------------------------------


def test_standin_run_as_a_subprocess(tmp_path: Path, rb: ModuleType) -> None:
    bundle = _bundle(tmp_path, n=3, broken=2)
    proc = _run_script(bundle, "--standin")
    assert proc.returncode == 0, proc.stderr
    assert "STAND-IN" in proc.stdout and "cand_0001" in proc.stdout
    res = json.loads((bundle / "results.json").read_text())
    assert res["standin"] is True and "STAND-IN" in res["note"]
    assert res["bundle_id"] == load_bundle(bundle)["id"]
    assert res["device"].startswith("stand-in") and res["compute_capability"] is None
    assert res["policy"]["repeat"] == 7 and res["policy"]["baselines"] is False
    assert res["baselines"] == {}
    assert set(res["candidates"]) == {"cand_0000", "cand_0001", "cand_0002"}
    for cid in ("cand_0000", "cand_0001"):
        c = res["candidates"][cid]
        assert c["error_kind"] == "standin" and c["workload_key"] == "wk_gemm"
        assert c["latency_s"] == pytest.approx(rb.fake_latency(cid))
        assert 1e-5 <= c["latency_s"] < 2e-5
    bad = res["candidates"]["cand_0002"]
    assert bad["error_kind"] == "run" and bad["latency_s"] is None
    assert "no launch takes parameter(s) [1]" in bad["error_msg"]
    # deterministic, and --repeat / --candidates / --out are honoured
    out = tmp_path / "again.json"
    proc = _run_script(
        bundle, "--standin", "--repeat", "3", "--candidates", "cand_0001", "--out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    again = json.loads(out.read_text())
    assert list(again["candidates"]) == ["cand_0001"] and again["policy"]["repeat"] == 3
    assert (
        again["candidates"]["cand_0001"]["latency_s"] == res["candidates"]["cand_0001"]["latency_s"]
    )
    proc = _run_script(bundle, "--standin", "--candidates", "nope")
    assert proc.returncode == 2 and "no candidate nope" in proc.stderr


def test_standin_validates_files(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, n=2)
    (bundle / "cands" / "cand_0000" / "kernel.cubin").unlink()
    (bundle / "cands" / "cand_0001" / "manifest.json").write_text("{not json")
    assert _run_script(bundle, "--standin").returncode == 0
    res = json.loads((bundle / "results.json").read_text())["candidates"]
    assert res["cand_0000"]["error_kind"] == "run"
    assert "kernel.cubin missing" in res["cand_0000"]["error_msg"]
    assert "manifest.json unreadable" in res["cand_0001"]["error_msg"]


def test_finalists_re_time_the_fastest_correct_candidates(tmp_path: Path, rb: ModuleType) -> None:
    """``--finalists K`` (a search round and the re-measure of its best in one GPU session),
    and ``benchmarks/tensorcore.py finish --adopt`` turning its output into a finish bundle."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from benchmarks import tensorcore as tc

    bundle = _bundle(tmp_path, n=4)
    wk = "wk_gemm"
    ranked = {
        "format": 1,
        "standin": False,
        "bundle_id": load_bundle(bundle)["id"],
        "candidates": {
            "cand_0000": {"workload_key": wk, "latency_s": 3e-5, "error_kind": None},
            "cand_0001": {"workload_key": wk, "latency_s": 1e-5, "error_kind": "wrong_result"},
            "cand_0002": {"workload_key": wk, "latency_s": 2e-5, "error_kind": None},
            "cand_0003": {"workload_key": wk, "latency_s": None, "error_kind": "run"},
        },
    }
    other = {"other": {"workload_key": "wk_2", "latency_s": 5e-5, "error_kind": None}}
    both = {**ranked, "candidates": {**ranked["candidates"], **other}}
    assert rb.fastest_ids(both, 2) == ["cand_0002", "cand_0000", "other"]
    assert rb.fastest_ids(both, 1) == ["cand_0002", "other"]
    assert rb.fastest_ids({**both, "standin": True}, 1) == []  # fake latencies rank nothing
    with pytest.raises(ValueError, match="at least 1"):
        rb.fastest_ids(both, 0)

    (bundle / "results.json").write_text(json.dumps(ranked))
    out = bundle / "finalists.json"
    proc = _run_script(bundle, "--standin", "--finalists", "2", "--repeat", "9", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    finalists = json.loads(out.read_text())
    assert list(finalists["candidates"]) == ["cand_0000", "cand_0002"]  # bundle order
    assert finalists["policy"]["repeat"] == 9
    for args, why in (
        (["--finalists", "1", "--candidates", "cand_0000"], "exclude each other"),
        (["--finalists", "1"], "must differ"),  # it would overwrite what it ranks
        (["--finalists", "1", "--ranked-by", str(out), "--out", str(tmp_path / "x.json")],
         "no correct measured candidate"),  # the stand-in's output ranks nothing
    ):  # fmt: skip
        proc = _run_script(bundle, "--standin", *args)
        assert proc.returncode == 2 and why in proc.stderr, proc.stderr

    finish = tc.adopt_finalists(out, tmp_path / "bundles")
    assert tc.is_finish_bundle(finish) and finish.parent == tmp_path / "bundles"
    adopted = load_bundle(finish)
    assert [c["id"] for c in adopted["candidates"]] == ["cand_0000", "cand_0002"]
    assert adopted["policy"]["repeat"] == 9 and adopted["policy"]["warmup"] == 2
    assert (finish / "cands" / "cand_0002" / "kernel.cubin").read_bytes() == CUBIN_BYTES
    assert json.loads((finish / "results.json").read_text()) == finalists
    # a later round's merged bundle carries earlier best beside its own candidates
    merged = tc.merge_bundles(
        [("G1_r001", bundle)],
        tmp_path / "merged",
        [("G1_best_x", finish, adopted["candidates"][1])],
    )
    ids = [c["id"] for c in load_bundle(merged)["candidates"]]
    assert ids == [f"G1_r001_cand_{i:04d}" for i in range(4)] + ["G1_best_x_cand_0002"]
    assert (merged / "cands" / "G1_best_x_cand_0002" / "kernel.cubin").is_file()
    stranger = tmp_path / "elsewhere"
    shutil.copytree(bundle, stranger)
    (stranger / "bundle.json").write_text(
        json.dumps({**load_bundle(bundle), "id": "another bundle"})
    )
    with pytest.raises(BundleError, match="names bundle"):
        tc.adopt_finalists(stranger / "finalists.json", tmp_path / "bundles")


@pytest.mark.parametrize(
    ("fault", "kind"), [("crash", "crash"), ("hang", "run_timeout")], ids=["crash", "hang"]
)
def test_a_dying_or_hanging_worker_costs_one_candidate(
    tmp_path: Path, fault: str, kind: str
) -> None:
    bundle = _bundle(tmp_path, n=3)
    env = {"RUN_BUNDLE_FAULT": f"{fault}:cand_0001"}
    proc = _run_script(bundle, "--standin", "--timeout", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((bundle / "results.json").read_text())["candidates"]
    assert res["cand_0001"]["error_kind"] == kind, res["cand_0001"]
    assert res["cand_0000"]["error_kind"] == "standin"
    assert res["cand_0002"]["error_kind"] == "standin"  # a fresh worker took the rest


def test_unreadable_bundle_is_a_clean_error(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, n=1)
    (bundle / "bundle.json").write_text("[]")
    proc = _run_script(bundle, "--standin")
    assert proc.returncode == 2 and "not a bundle" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- import_results ------------------------------------------------------------------------------


def _standin_results(tmp_path: Path, **kw) -> Path:
    bundle = _bundle(tmp_path, **kw)
    proc = _run_script(bundle, "--standin")
    assert proc.returncode == 0, proc.stderr
    return bundle


def _as_measured(bundle: Path, latencies: dict[str, float | None]) -> None:
    """Turn stand-in results into what a GPU run would have written."""
    path = bundle / "results.json"
    res = json.loads(path.read_text())
    res["standin"] = False
    res.pop("note")
    res["device"], res["compute_capability"] = "NVIDIA H100 80GB HBM3", "9.0"
    for cid, lat in latencies.items():
        c = res["candidates"][cid]
        if lat is None:
            c.update(
                latency_s=None,
                latencies_s=[],
                error_kind="wrong_result",
                error_msg="3/100 elements differ",
                max_abs_err=0.5,
            )
        else:
            c.update(latency_s=lat, latencies_s=[lat] * 3, error_kind=None, error_msg=None)
        c["run_s"] = 0.25
    res["baselines"] = {"wk_gemm": {"name": "torch.matmul", "latency_s": 2e-5, "correct": True}}
    path.write_text(json.dumps(res))


def test_import_standin_results(tmp_path: Path) -> None:
    bundle = _standin_results(tmp_path, n=3, broken=2)
    db_path = tmp_path / "records.sqlite"
    with Records(db_path) as db:
        with pytest.raises(BundleError, match="stand-in"):
            import_results(bundle, db)
        assert db.count("wk_gemm", "cuda -arch=sm_90") == 0
        s = import_results(bundle, db, allow_standin=True)
        assert (s.imported, s.skipped, s.missing) == (3, 0, 0)
        assert s.failed == {"standin": 2, "run": 1} and s.standin and s.best == {}
        trials = db.trials("wk_gemm", "cuda -arch=sm_90")
        assert [t.trial_index for t in trials] == [0, 1, 2]
        assert all(t.latency_s is None and not t.ok for t in trials)
        assert [t.error_kind for t in trials] == ["standin", "standin", "run"]
        assert trials[1].assignment == {"tile_m": 32, "tile_n": 32} and trials[1].build_s == 1.5
        assert trials[0].explorer == "bundle" and trials[0].seed == 7
        # a second import adds nothing
        again = import_results(bundle, db, allow_standin=True)
        assert (again.imported, again.skipped) == (0, 3)
        assert db.count("wk_gemm", "cuda -arch=sm_90") == 3
        assert db.workload_info("wk_gemm", "cuda -arch=sm_90")["description"] == (
            "gemm 120x64x64 fp16"
        )


def test_import_measured_results(tmp_path: Path) -> None:
    bundle = _standin_results(tmp_path, n=3)
    _as_measured(bundle, {"cand_0000": 3e-5, "cand_0001": 1.5e-5, "cand_0002": None})
    pairs = read_results(bundle)
    assert [c["id"] for c, _ in pairs] == ["cand_0000", "cand_0001", "cand_0002"]
    m = pairs[1][1]
    assert (m.error_kind, m.latency_s, m.build_s, m.run_s) == (None, 1.5e-5, 1.5, 0.25)
    assert pairs[2][1].error_kind == "wrong_result" and pairs[2][1].latency_s is None
    db_path = tmp_path / "records.sqlite"
    with Records(db_path) as db:
        first = import_results(bundle, db)
        assert (first.imported, first.skipped) == (3, 0)
        assert first.best == {"wk_gemm": (1.5e-5, "cand_0001")}
        assert first.failed == {"wrong_result": 1} and first.device.startswith("NVIDIA")
        best = db.best("wk_gemm", "cuda -arch=sm_90")
        assert best is not None and best.latency_s == 1.5e-5 and best.run_s == 0.25
        assert best.assignment == {"tile_m": 32, "tile_n": 32}
    # another bundle with one new and one known assignment, appended after the earlier trials
    other = tmp_path / "other"
    other.mkdir()
    cands = _candidates(other, 2)
    cands[0]["assignment"] = {"tile_m": 99, "tile_n": 1}
    cands[0]["explorer"], cands[0]["seed"] = "cga", 3
    b2 = write_bundle(other / "bundle", [_workload()], cands, explorer="sa", seed=11)
    assert _run_script(b2, "--standin").returncode == 0
    _as_measured(b2, {"cand_0000": 1e-5, "cand_0001": 1e-5})
    s = import_results(b2, db_path)  # a path: opened and closed
    assert (s.imported, s.skipped) == (1, 1)
    with Records(db_path) as db:
        last = db.trials("wk_gemm", "cuda -arch=sm_90")[-1]
        assert last.trial_index == 3 and last.explorer == "cga" and last.seed == 3
        assert db.best("wk_gemm", "cuda -arch=sm_90").latency_s == 1e-5


def test_results_must_belong_to_the_bundle(tmp_path: Path) -> None:
    bundle = _standin_results(tmp_path, n=1)
    foreign = tmp_path / "foreign.json"
    res = json.loads((bundle / "results.json").read_text())
    res["bundle_id"] = "0" * 32
    foreign.write_text(json.dumps(res))
    with pytest.raises(BundleError, match="written for bundle"):
        read_results(bundle, foreign)
    with pytest.raises(BundleError, match="cannot read results"):
        read_results(bundle, tmp_path / "missing.json")


def test_missing_results_are_counted(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path, n=3)
    assert _run_script(bundle, "--standin", "--candidates", "cand_0002").returncode == 0
    s = import_results(bundle, tmp_path / "r.sqlite", allow_standin=True)
    assert (s.imported, s.missing) == (1, 2)


# -- the CLI -------------------------------------------------------------------------------------


def test_cli_import_results(tmp_path: Path) -> None:
    bundle = _standin_results(tmp_path, n=2)
    db = tmp_path / "records.sqlite"
    runner = CliRunner()
    res = runner.invoke(cli.main, ["import-results", str(bundle), "--records", str(db)])
    assert res.exit_code != 0 and isinstance(res.exception, BundleError)
    args = ["import-results", str(bundle), "--records", str(db), "--allow-standin"]
    res = runner.invoke(cli.main, args)
    assert res.exit_code == 0, res.output
    assert "STAND-IN" in res.output and "imported" in res.output
    assert "standin: 2" in res.output
    res = runner.invoke(cli.main, args)
    assert res.exit_code == 0 and "2 (already recorded)" in res.output
    _as_measured(bundle, {"cand_0000": 4e-5, "cand_0001": None})
    copy = tmp_path / "results-copy.json"
    shutil.copy(bundle / "results.json", copy)
    res = runner.invoke(
        cli.main,
        [
            "import-results",
            str(bundle),
            "--records",
            str(tmp_path / "new.sqlite"),
            "--results",
            str(copy),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "0.0400 ms (cand_0000)" in res.output and "torch.matmul" in res.output
    assert "wrong_result: 1" in res.output


def test_cli_import_results_error_is_one_line(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("heronlike")
    if not script.exists():
        pytest.skip("the heronlike console script is not installed")
    bundle = _standin_results(tmp_path, n=1)
    proc = subprocess.run(
        [str(script), "import-results", str(bundle), "--records", str(tmp_path / "r.sqlite")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "BundleError" in proc.stderr and "stand-in" in proc.stderr
    assert "Traceback" not in proc.stderr


# -- BundleRunner --------------------------------------------------------------------------------


def test_bundle_runner_with_the_standin(tmp_path: Path) -> None:
    folders = [Path(c["artifact_dir"]) for c in _candidates(tmp_path, 2)]
    script = Path(__file__).parents[1] / "heronlike" / "measure" / "run_bundle.py"
    runner = BundleRunner(
        tmp_path / "work",
        [sys.executable, str(script), "--standin"],
        _workload(),
        repeat=3,
        warmup=1,
    )
    assert (runner.number, runner.repeat) == (1, 3)
    inputs = [
        RunInput(str(folders[0]), "unused.npz", None, info=_manifest()),
        RunInput(str(tmp_path / "nowhere"), "unused.npz", None),
        RunInput(str(folders[1]), "unused.npz", None),  # manifest.json is read
    ]
    out = runner.run(inputs)
    assert [r.error_kind for r in out] == ["standin", "run", "standin"]
    assert "no kernel.cubin" in out[1].error_msg
    assert runner.last_bundle == tmp_path / "work" / "bundle_0000"
    ids = [c["id"] for c in load_bundle(runner.last_bundle)["candidates"]]
    assert ids == ["c0000", "c0002"]
    runner.run(inputs[:1])
    assert runner.last_bundle == tmp_path / "work" / "bundle_0001"
    runner.close()


def test_bundle_runner_command_failure_is_data(tmp_path: Path) -> None:
    folder = Path(_candidates(tmp_path, 1)[0]["artifact_dir"])
    runner = BundleRunner(
        tmp_path / "work",
        [sys.executable, "-c", "import sys; sys.exit(3)"],
        _workload(),
        keep=False,
    )
    (res,) = runner.run([RunInput(str(folder), "unused.npz", None)])
    assert res.error_kind == "run" and "exited with status 3" in res.error_msg
    assert not (tmp_path / "work" / "bundle_0000").exists()
    with pytest.raises(BundleError):
        BundleRunner(tmp_path / "w2", None, {"workload_key": "wk"})  # malformed


def test_bundle_runner_takes_each_inputs_workload(tmp_path: Path) -> None:
    """Inputs carry their workload (``RunInput.workload``, as the tune loop passes it): one
    bundle holds the workloads of a batch; an input without one, when the runner has none
    either, or with a malformed one, fails alone as ``"run"``."""
    folders = [Path(c["artifact_dir"]) for c in _candidates(tmp_path, 2)]
    runner = BundleRunner(tmp_path / "work", None, None, repeat=2, script_args=["--standin"])
    inputs = [
        RunInput(str(folders[0]), "unused.npz", None, workload=_workload("wk_a", seed=1)),
        RunInput(str(folders[1]), "unused.npz", None, workload=_workload("wk_b", seed=2)),
        RunInput(str(folders[0]), "unused.npz", None),
        RunInput(str(folders[1]), "unused.npz", None, workload={"workload_key": "bad"}),
    ]
    out = runner.run(inputs)
    assert [r.error_kind for r in out] == ["standin", "standin", "run", "run"]
    assert all(r.latency_s is None for r in out)
    assert "no workload" in out[2].error_msg and "bad" in out[3].error_msg
    bundle = load_bundle(runner.last_bundle)
    assert [w["workload_key"] for w in bundle["workloads"]] == ["wk_a", "wk_b"]
    assert [w["seed"] for w in bundle["workloads"]] == [1, 2]
    assert [c["workload_key"] for c in bundle["candidates"]] == ["wk_a", "wk_b"]


# -- the script's data and reference functions -------------------------------------------------


def test_draw_inputs_is_deterministic(rb: ModuleType) -> None:
    wl = _workload(seed=3)
    wl["params"].insert(2, {"name": "Q", "shape": [4096], "dtype": "int8", "role": "input"})
    wl["params"].insert(3, {"name": "H", "shape": [64], "dtype": "bfloat16", "role": "input"})
    a = rb.draw_inputs(wl)
    b = rb.draw_inputs(wl)
    c = rb.draw_inputs(_workload(seed=4) | {"params": wl["params"]})
    assert a[4] is None  # the output
    for x, y in zip(a[:4], b[:4]):
        assert x.dtype == y.dtype and np.array_equal(x, y)
    assert not np.array_equal(a[0], c[0])
    assert a[0].shape == (120, K) and a[0].dtype == np.float16  # the logical shape
    assert -1.0 <= float(a[0].min()) and float(a[0].max()) <= 1.0  # [-1, 1) rounded to fp16
    assert a[2].dtype == np.int8 and a[2].min() == -128 and a[2].max() == 127
    h = rb.decode(a[3], "bfloat16")
    assert a[3].dtype == np.uint16 and h.dtype == np.float32 and np.abs(h).max() <= 1.0
    # the same draw as a direct numpy computation
    rng = np.random.default_rng(3)
    assert np.array_equal(a[0], rng.uniform(-1.0, 1.0, size=(120, K)).astype(np.float16))


def test_bf16_rounding(rb: ModuleType) -> None:
    x = np.array([1.0, -2.5, 1 + 2**-8, 1 + 3 * 2**-9, 3.0e38], dtype=np.float32)
    back = rb.decode(rb.bf16_bits(x), "bfloat16")
    assert back.tolist()[:3] == [1.0, -2.5, 1.0]  # 1 + 2^-8 ties to even: 1.0
    assert back[3] == np.float32(1 + 2**-7)


def test_pad_to_a_larger_kernel_shape(rb: ModuleType) -> None:
    x = np.arange(15, dtype=np.float16).reshape(3, 5)
    y = rb.pad_to(x, [4, 8])
    assert y.shape == (4, 8) and y.dtype == np.float16 and y.flags.c_contiguous
    assert np.array_equal(y[:3, :5], x) and not y[3].any() and not y[:, 5:].any()
    assert rb.pad_to(x, (3, 5)) is not None
    with pytest.raises(ValueError):
        rb.pad_to(x, [2, 8])
    with pytest.raises(ValueError):
        rb.pad_to(x, [3, 6, 1])  # another rank and another size
    # another rank with as many elements: a row-major view (an implicit GEMM's weight/output)
    assert np.array_equal(rb.pad_to(x, [15]), x.reshape(15))
    fill = rb.output_fill(_workload(), 2)
    assert fill.shape == (M, N) and np.isnan(fill).all()


def test_reference_gemm_on_logical_shapes(rb: ModuleType) -> None:
    wl = _workload()
    inputs = rb.draw_inputs(wl)
    (idx, expected), *_ = rb.compute_reference(wl, inputs).items()
    a = inputs[0].astype(np.float32)
    b = inputs[1].astype(np.float32)
    assert idx == 2 and expected.dtype == np.float32 and expected.shape == (120, N)
    np.testing.assert_allclose(expected, a @ b.T, rtol=1e-5, atol=1e-5)
    # checking a padded kernel output: only the logical part counts
    out = np.full((M, N), np.nan, dtype=np.float32)
    out[:120] = a @ b.T
    msg, err = rb.check_output(out[:120], expected, "float32", 1e-2, 1e-2)
    assert msg is None and err < 1e-4
    out[5, 7] = np.nan
    msg, err = rb.check_output(out[:120], expected, "float32", 1e-2, 1e-2)
    assert "1/7680 elements differ" in msg and "1 NaN" in msg and err is None


def test_reference_einsum_forms(rb: ModuleType) -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 8, 5)).astype(np.float32)
    y = rng.standard_normal((3, 5, 6)).astype(np.float32)
    z = rng.standard_normal((6, 5)).astype(np.float32)
    bmm = rb.einsum_reference("bmk,bkn->bmn", [x, y])
    np.testing.assert_allclose(bmm, np.matmul(x, y), rtol=1e-5, atol=1e-5)
    tr = rb.einsum_reference("bmk,nk->bnm", [x, z])
    np.testing.assert_allclose(tr, np.einsum("bmk,nk->bnm", x, z), rtol=1e-5, atol=1e-5)
    assert rb.gemm_plan("mk,nk->mn") == ([], ["m"], ["n"], ["k"])
    assert rb.gemm_plan("bmk,bkn->bmn") == (["b"], ["m"], ["n"], ["k"])
    assert rb.gemm_plan("ij,jk,kl->il") is None and rb.gemm_plan("mk,n->mn") is None
    red = rb.einsum_reference("mk->m", [x[0]])  # not a matrix product: plain einsum
    np.testing.assert_allclose(red, x[0].sum(1), rtol=1e-5)
    with pytest.raises(ValueError, match="extent"):
        rb.einsum_reference("mk,kn->mn", [x[0], y[0].T])


def test_reference_integer_gemm_is_exact(rb: ModuleType) -> None:
    wl = _workload()
    wl["params"][0].update(dtype="int8")
    wl["params"][1].update(dtype="int8")
    wl["params"][2].update(dtype="int32")
    inputs = rb.draw_inputs(wl)
    expected = rb.compute_reference(wl, inputs)[2]
    direct = inputs[0].astype(np.int64) @ inputs[1].astype(np.int64).T
    assert expected.dtype == np.int32 and np.array_equal(expected, direct)
    msg, err = rb.check_output(direct.astype(np.int32), expected, "int32", 0.0, 0.0)
    assert msg is None and err == 0.0
    off = direct.astype(np.int32)
    off[0, 0] += 1
    msg, _ = rb.check_output(off, expected, "int32", 0.5, 0.5)
    assert msg.startswith("1/7680 elements differ (exact)")


def _naive_conv(x, w, stride, pad, dil):  # noqa: ANN001, ANN202
    n, h, wd, ci = x.shape
    co, kh, kw, _ = w.shape
    ho = (h + 2 * pad[0] - dil[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + 2 * pad[1] - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, ho, wo, co), dtype=np.float64)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    for b in range(n):
        for i in range(ho):
            for j in range(wo):
                for o in range(co):
                    acc = 0.0
                    for r in range(kh):
                        for s in range(kw):
                            y = i * stride[0] - pad[0] + r * dil[0]
                            z = j * stride[1] - pad[1] + s * dil[1]
                            if 0 <= y < h and 0 <= z < wd:
                                acc += float(np.dot(x64[b, y, z], w64[o, r, s]))
                    out[b, i, j, o] = acc
    return out


def test_reference_conv2d_nhwc(rb: ModuleType) -> None:
    stride, pad, dil = [2, 2], [1, 1], [2, 2]
    ho, wo = rb.conv2d_output_hw(9, 10, 3, 3, stride, pad, dil)
    assert (ho, wo) == (4, 4)
    wl = {
        "workload_key": "wk_conv",
        "target_key": "cuda",
        "params": [
            {"name": "X", "shape": [2, 9, 10, 8], "dtype": "float16", "role": "input"},
            {"name": "W", "shape": [16, 3, 3, 8], "dtype": "float16", "role": "input"},
            {"name": "Y", "shape": [2, 4, 4, 16], "dtype": "float32", "role": "output"},
        ],
        "reference": {
            "kind": "conv2d_nhwc",
            "input": 0,
            "weight": 1,
            "output": 2,
            "stride": stride,
            "padding": pad,
            "dilation": dil,
        },
        "seed": 5,
        "rtol": 1e-3,
        "atol": 1e-3,
    }
    assert rb.check_workload(wl) is None
    inputs = rb.draw_inputs(wl)
    expected = rb.compute_reference(wl, inputs)[2]
    naive = _naive_conv(
        inputs[0].astype(np.float32), inputs[1].astype(np.float32), stride, pad, dil
    )
    assert expected.shape == (2, 4, 4, 16)
    np.testing.assert_allclose(expected, naive, rtol=1e-5, atol=1e-5)
    # integers: exact
    x = np.random.default_rng(1).integers(-128, 128, size=(1, 7, 7, 4), dtype=np.int8)
    w = np.random.default_rng(2).integers(-128, 128, size=(3, 3, 3, 4), dtype=np.int8)
    got = rb.conv2d_nhwc_reference(x.astype(np.int64), w.astype(np.int64), [2, 1], [1, 0], [1, 2])
    assert np.array_equal(got, _naive_conv(x, w, [2, 1], [1, 0], [1, 2]).astype(np.int64))
    wl["params"][2]["shape"] = [2, 5, 5, 16]
    with pytest.raises(ValueError, match="logical shape"):
        rb.compute_reference(wl, inputs)


def test_manifest_checks(rb: ModuleType) -> None:
    wl = _workload()
    assert rb.check_manifest(_manifest(), wl) is None
    m = _manifest()
    m["params"][0]["shape"] = [M, 32]
    assert "shape" in rb.check_manifest(m, wl)
    m = _manifest()
    m["launches"][0]["args"] = [2, 0, 7]
    assert "not a parameter index" in rb.check_manifest(m, wl)
    m = _manifest()
    m["launches"][0]["block"] = [1024, 2, 1]
    assert "1024 threads" in rb.check_manifest(m, wl)
    m = _manifest()
    del m["launches"][0]["grid"]
    assert "malformed manifest" in rb.check_manifest(m, wl)
    m = _manifest()
    m["launches"].append({**m["launches"][0], "kernel": "second", "args": [2]})
    assert rb.check_manifest(m, wl) is None  # several launches on the same buffers


def test_timing_protocol(rb: ModuleType) -> None:
    log: list[str] = []
    clock = [0.0]

    class Event:
        def record(self) -> None:
            self.t = clock[0]

        def synchronize(self) -> None:
            pass

    def call() -> None:
        log.append("call")
        clock[0] += 2.0  # ms

    lats = rb.time_calls(
        call,
        flush=lambda r: log.append(f"flush{r}"),
        event=Event,
        elapsed_ms=lambda s, e: e.t - s.t,
        synchronize=lambda: log.append("sync"),
        warmup=2,
        repeat=3,
        number=2,
    )
    assert lats == [0.002, 0.002, 0.002]
    assert log == ["call", "call", "sync"] + sum(
        ([f"flush{r}", "call", "call"] for r in range(3)), []
    )


# -- the GPU path, against a numpy imitation of CuPy ---------------------------------------------

FAKE_CUPY = '''
"""A numpy imitation of the few CuPy calls run_bundle.py makes (tests only; no GPU)."""
import time
import types

import numpy as np

__version__ = "0.0+fake"
_state = {"poisoned": False}


def __getattr__(name):
    return getattr(np, name)


def asarray(a, dtype=None):
    return np.array(a, dtype=dtype)  # a copy, like a transfer to the device


def asnumpy(a):
    return np.array(a)


class _Array(np.ndarray):
    @property
    def data(self):
        return types.SimpleNamespace(ptr=0)


def empty(shape, dtype=float):
    return np.empty(shape, dtype).view(_Array)


class _Runtime:
    memsets = 0

    @staticmethod
    def deviceSynchronize():
        if _state["poisoned"]:
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access")

    @staticmethod
    def memsetAsync(ptr, value, size, stream):
        _Runtime.memsets += 1

    @staticmethod
    def getDeviceProperties(i):
        return {"name": b"Fake GPU", "major": 9, "minor": 0, "multiProcessorCount": 132,
                "l2CacheSize": 50 << 20}

    @staticmethod
    def driverGetVersion():
        return 13000

    runtimeGetVersion = driverGetVersion


class _Device:
    id = 0
    compute_capability = "90"


class _Event:
    def record(self):
        self.t = time.perf_counter()

    def synchronize(self):
        pass


cuda = types.SimpleNamespace(
    runtime=_Runtime,
    Device=_Device,
    Event=_Event,
    get_elapsed_time=lambda s, e: (e.t - s.t) * 1e3,
    get_current_stream=lambda: types.SimpleNamespace(ptr=0),
)


class _Kernel:
    max_dynamic_shared_size_bytes = 0

    def __init__(self, kind, name=""):
        self.kind = kind
        self.name = name

    def __call__(self, grid, block, args, shared_mem=0):
        if shared_mem > 48 * 1024 and self.max_dynamic_shared_size_bytes < shared_mem:
            raise RuntimeError("CUDA_ERROR_INVALID_VALUE: dynamic shared memory over the limit")
        if self.kind == "poison":
            _state["poisoned"] = True
            raise RuntimeError("cudaErrorIllegalAddress: an illegal memory access")
        if self.kind == "splitk":  # grid.y partial sums into a byte workspace, then their sum
            if self.name == "main_kernel":
                ws, a, b = args
                parts = ws.view(np.float32).reshape(grid[1], a.shape[0], b.shape[0])
                for s, (x, w) in enumerate(zip(np.split(a, grid[1], 1), np.split(b, grid[1], 1))):
                    parts[s] = x.astype(np.float32) @ w.astype(np.float32).T
            else:
                c, ws = args
                c[...] = ws.view(np.float32).reshape(-1, *c.shape).sum(0)
            return
        c, a, b = args
        if self.kind == "gemm":
            c[...] = a.astype(np.float32) @ b.astype(np.float32).T
        else:
            c[...] = 0


class RawModule:
    def __init__(self, path):
        with open(path, "rb") as fh:
            self.kind = fh.read().decode().removeprefix("FAKE:")

    def get_function(self, name):
        if self.kind == "reject":
            raise RuntimeError("CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available")
        return _Kernel(self.kind, name)
'''


def test_gpu_path_with_a_numpy_imitation_of_cupy(tmp_path: Path) -> None:
    fake = tmp_path / "fake" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_CUPY)
    kinds = ["gemm", "wrong", "reject", "poison", "gemm", "gemm"]
    cands = _candidates(tmp_path, len(kinds))
    for cand, kind in zip(cands, kinds):
        (Path(cand["artifact_dir"]) / "kernel.cubin").write_bytes(f"FAKE:{kind}".encode())
    big = _manifest()
    big["launches"][0]["dynamic_shared_bytes"] = 100 * 1024  # needs the opt-in
    cands[5]["manifest"] = big
    bundle = write_bundle(tmp_path / "bundle", [_workload()], cands, repeat=5, warmup=1)
    env = {"PYTHONPATH": str(fake.parent), "PATH": str(tmp_path / "no-bin")}  # no nvcc
    proc = _run_script(bundle, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "Fake GPU" in proc.stdout
    res = json.loads((bundle / "results.json").read_text())
    assert res["standin"] is False and res["device"] == "Fake GPU"
    assert res["compute_capability"] == "9.0" and res["driver"] == "CUDA 13.0"
    assert res["baselines"]["wk_gemm"]["error_msg"] in (
        "torch is not importable",  # CI installs no PyTorch
        f"torch {_torch_version()} has no CUDA device",  # `make demo` installs a CPU build
    )
    c = res["candidates"]
    assert [c[f"cand_{i:04d}"]["error_kind"] for i in range(6)] == [
        None,
        "wrong_result",
        "run",
        "crash",
        None,  # a fresh worker after the lost context
        None,
    ]
    ok = c["cand_0000"]
    assert len(ok["latencies_s"]) == 5 and ok["latency_s"] > 0
    assert ok["max_abs_err"] < 1e-3
    assert "7680 elements differ" in c["cand_0001"]["error_msg"]  # the logical 120x64 part
    assert "NO_BINARY_FOR_GPU" in c["cand_0002"]["error_msg"]
    assert "context lost" in c["cand_0003"]["error_msg"]
    s = import_results(bundle, tmp_path / "records.sqlite")
    assert (s.imported, s.failed) == (6, {"wrong_result": 1, "run": 1, "crash": 1})
    assert s.best["wk_gemm"][1] in ("cand_0000", "cand_0004", "cand_0005")


def _split_k_manifest(split: int, ws_bytes: int | None = None) -> dict:
    """Two launches sharing a workspace of ``split`` fp32 partial sums (a split-K candidate)."""
    ws = {"name": "C.rf", "shape": [split * M * N], "dtype": "float32"}
    ws["bytes"] = ws_bytes if ws_bytes is not None else split * M * N * 4
    manifest = _manifest(args=[None, 0, 1])
    manifest["launches"][0].update(grid=[4, split, 1], workspaces=[ws, None, None])
    manifest["launches"].append(
        {
            "kernel": "main_kernel_1",
            "grid": [M * N // 128, 1, 1],
            "block": [128, 1, 1],
            "dynamic_shared_bytes": 0,
            "args": [2, None],
            "workspaces": [None, ws],
        }
    )
    manifest["kernels"]["main_kernel_1"] = dict(manifest["kernels"]["main_kernel"])
    return manifest


def test_gpu_path_allocates_split_k_workspaces(tmp_path: Path) -> None:
    """A split-K candidate's launches get one shared workspace (by name) beside the parameters
    and its output is checked like any other; a workspace of the wrong size is rejected before
    anything runs."""
    fake = tmp_path / "fake" / "cupy"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(FAKE_CUPY)
    cands = _candidates(tmp_path, 2)
    for cand in cands:
        (Path(cand["artifact_dir"]) / "kernel.cubin").write_bytes(b"FAKE:splitk")
    cands[0]["manifest"] = _split_k_manifest(4)
    cands[1]["manifest"] = _split_k_manifest(4, ws_bytes=12)
    bundle = write_bundle(tmp_path / "bundle", [_workload()], cands, repeat=3, warmup=1)
    env = {"PYTHONPATH": str(fake.parent), "PATH": str(tmp_path / "no-bin")}
    proc = _run_script(bundle, env=env)
    assert proc.returncode == 0, proc.stderr
    c = json.loads((bundle / "results.json").read_text())["candidates"]
    assert c["cand_0000"]["error_kind"] is None and c["cand_0000"]["max_abs_err"] < 1e-3
    assert c["cand_0001"]["error_kind"] == "run"
    assert "invalid candidate" in c["cand_0001"]["error_msg"]
    assert "workspace" in c["cand_0001"]["error_msg"]


def _torch_version() -> str | None:
    try:
        import torch
    except ImportError:
        return None
    return torch.__version__
