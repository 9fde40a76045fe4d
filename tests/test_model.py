"""Models end to end: PyTorch and ONNX in, tuned and compiled, checked against PyTorch.

Two small models stand for the two families the issue names: a CNN (conv + bias + ReLU, a
residual add, pooling, linear) and a transformer block (2 heads, hidden 64: matmuls, softmax,
layer norm, GELU). Tunes are real but small (a few trials on this CPU, ``llvm``).
"""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import heronlike  # noqa: E402
import heronlike.model as hm  # noqa: E402
from heronlike import ops  # noqa: E402
from heronlike.dag import ComputeDAG  # noqa: E402
from heronlike.errors import (  # noqa: E402
    HostFeatureError,
    ModelImportError,
    ModelInputError,
    SymbolicShapeError,
    UnsupportedOperatorError,
)
from heronlike.host import cpu_flags  # noqa: E402

RTOL, ATOL = 1e-4, 1e-4  # float32 kernels reorder sums; PyTorch's do too


class SmallCNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        z = torch.relu(self.c2(y)) + y
        z = torch.nn.functional.max_pool2d(z, 2)
        return self.fc(torch.nn.functional.adaptive_avg_pool2d(z, 1).flatten(1))


class SmallBlock(torch.nn.Module):
    """A pre-LN-free transformer encoder block: attention (2 heads) and a GELU MLP."""

    def __init__(self, d: int = 64, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln1 = torch.nn.LayerNorm(d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        h = self.heads
        q, k, v = (z.reshape(b, t, h, d // h).transpose(1, 2) for z in self.qkv(x).split(d, dim=-1))
        att = torch.softmax(q @ k.transpose(-1, -2) / (d // h) ** 0.5, dim=-1) @ v
        x = self.ln1(x + self.proj(att.transpose(1, 2).reshape(b, t, d)))
        return self.ln2(x + self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def _model(kind: str) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    if kind == "cnn":
        return SmallCNN().eval(), torch.randn(1, 3, 16, 16)
    return SmallBlock().eval(), torch.randn(1, 16, 64)


def _onnx(net: torch.nn.Module, x: torch.Tensor, path: Path) -> Path:
    torch.onnx.export(net, (x,), str(path), dynamo=False, input_names=["x"])
    return path


def _reference(net: torch.nn.Module, x: torch.Tensor) -> np.ndarray:
    with torch.no_grad():
        return net(x).numpy()


@pytest.mark.parametrize("kind", ["cnn", "block"])
@pytest.mark.parametrize("source", ["torch", "onnx"])
def test_default_schedules_match_pytorch(kind: str, source: str, tmp_path: Path) -> None:
    """With no records every task still gets a scheduled kernel (never TVM's serial
    lowering), and the compiled model computes what PyTorch computes."""
    net, x = _model(kind)
    mod = hm.from_torch(net, (x,)) if source == "torch" else _onnx(net, x, tmp_path / "m.onnx")
    compiled = hm.compile_model(mod, "llvm")
    assert compiled.choices and {c.source for c in compiled.choices} == {"default"}
    np.testing.assert_allclose(compiled(x.numpy()), _reference(net, x), rtol=RTOL, atol=ATOL)


def _llvm_asm(compiled: hm.CompiledModel) -> str:
    mods = compiled.executable.mod.imports
    return "".join(str(m.inspect_source("asm")) for m in mods if m.kind == "llvm")


def test_fast_math_leaves_no_scalar_libm_call() -> None:
    """By default GELU (through erf), exp and softmax take TVM's vectorisable polynomial
    approximations: the kernels call no scalar ``erff`` / ``expf`` per element, and the model
    still computes what PyTorch computes; ``fast_math=False`` keeps libm's."""
    net, x = _model("block")
    mod = hm.from_torch(net, (x,))
    names = " ".join(t.name for t in hm.extract_tasks(mod, "llvm"))
    assert "fast_erf" in names and "fast_softmax" in names and "gelu" not in names
    fast, exact = (hm.compile_model(mod, "llvm", fast_math=f) for f in (True, False))
    libm = re.compile(r"\b(erff|expf)\b")
    assert not libm.search(_llvm_asm(fast))
    assert libm.search(_llvm_asm(exact))
    for compiled in (fast, exact):
        np.testing.assert_allclose(compiled(x.numpy()), _reference(net, x), rtol=RTOL, atol=ATOL)


def test_tasks_are_distinct_and_weighted() -> None:
    """The block's two layer norms are one task of weight 2; names carry the shapes."""
    net, x = _model("block")
    tasks = hm.extract_tasks(hm.from_torch(net, (x,)), "llvm")
    keys = [t.workload_key for t in tasks]
    assert len(keys) == len(set(keys))
    ln = [t for t in tasks if t.name.startswith("layer_norm")]
    assert len(ln) == 1 and ln[0].weight == 2 and "1x16x64" in ln[0].name
    assert all(t.tunable for t in tasks)
    assert sum(t.flop * t.weight for t in tasks) > 2 * 16 * 64 * 64 * 3  # at least the QKV GEMM


def test_tune_resume_and_compile_cnn(tmp_path: Path) -> None:
    """A small real tune: every trial lands in the records, a rerun measures nothing, and the
    compiled model uses the tuned kernels and matches PyTorch."""
    net, x = _model("cnn")
    mod = hm.from_torch(net, (x,))
    records = tmp_path / "r.sqlite"
    first = hm.tune_model(mod, "llvm", trials=8, records=records, batch_size=4, progress=False)
    assert first.trials_run == 8 and first.trials_done == 8
    assert first.estimate_s > 0
    tuned = {t.name for t in first.tasks if t.trials}
    assert len(tuned) == 2  # warm-up: the two heaviest tasks get one round each
    with sqlite3.connect(records) as db:
        n = db.execute("SELECT COUNT(*) FROM trials").fetchone()[0]
    again = hm.tune_model(mod, "llvm", trials=8, records=records, batch_size=4, progress=False)
    assert again.trials_run == 0
    with sqlite3.connect(records) as db:
        assert db.execute("SELECT COUNT(*) FROM trials").fetchone()[0] == n
    compiled = hm.compile_model(mod, "llvm", records)
    by_source = {c.task: c.source for c in compiled.choices}
    assert {by_source[name] for name in tuned} == {"tuned"}
    assert all(c.latency_s > 0 for c in compiled.choices if c.source == "tuned")
    np.testing.assert_allclose(compiled(x.numpy()), _reference(net, x), rtol=RTOL, atol=ATOL)
    assert compiled.benchmark(repeat=3) > 0


def test_profile_times_every_kernel_in_the_model() -> None:
    """The profile calls each task's kernel as often as the task's weight says, its kernel
    time fits inside the instrumented run, and the virtual machine's own calls are apart."""
    net, x = _model("block")
    mod = hm.from_torch(net, (x,))
    compiled = hm.compile_model(mod, "llvm")
    prof = compiled.profile(x.numpy(), runs=3, warmup=1)
    kernels = [c for c in prof.calls if c.source != "builtin"]
    assert {c.source for c in kernels} == {"default"}
    calls = {}
    for c in kernels:
        calls[c.task] = calls.get(c.task, 0) + c.calls
    assert calls == {t.name: t.weight for t in hm.extract_tasks(mod, "llvm")}
    assert all(c.seconds > 0 for c in kernels)
    assert 0 < prof.kernel_s + prof.builtin_s < prof.profiled_s
    assert prof.model_s > 0 and prof.calls == sorted(prof.calls, key=lambda c: -c.seconds)
    assert all(c.recorded_s is None and c.in_model_vs_alone is None for c in kernels)
    assert "in model/alone" in prof.table()
    with pytest.raises(ValueError, match="runs"):
        compiled.profile(x.numpy(), runs=0)


def test_export_and_load_in_a_fresh_process(tmp_path: Path) -> None:
    net, x = _model("block")
    compiled = hm.compile_model(hm.from_torch(net, (x,)), "llvm")
    lib = compiled.export_library(tmp_path / "block.so")
    manifest = json.loads((tmp_path / "block.so.json").read_text())
    assert manifest["inputs"][0]["shape"] == [1, 16, 64]
    np.save(tmp_path / "x.npy", x.numpy())
    code = (
        "import sys, numpy as np, heronlike.model as hm\n"
        f"m = hm.load({str(lib)!r})\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, m(np.load({str(tmp_path / 'x.npy')!r})))\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), compiled(x.numpy()))


def test_bad_inputs_give_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(ModelImportError, match="no such ONNX file"):
        hm.from_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all")
    with pytest.raises(ModelImportError):
        hm.from_onnx(tmp_path / "junk.onnx")
    node = onnx.helper.make_node("FancyNewOp", ["x"], ["y"])
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4])],
    )
    with pytest.raises(UnsupportedOperatorError, match="FancyNewOp") as err:
        hm.from_onnx(onnx.helper.make_model(graph))
    assert err.value.operators == ("FancyNewOp",)
    net, x = _model("cnn")
    compiled = hm.compile_model(hm.from_torch(net, (x,)), "llvm")
    with pytest.raises(ModelInputError, match=r"float32\[1, 3, 16, 16\]"):
        compiled(np.zeros((1, 3, 8, 8), "float32"))
    with pytest.raises(ModelInputError, match="takes 1 input"):
        compiled()
    with pytest.raises(heronlike.InvalidArgumentError):
        hm.compile_model(net, "llvm")  # a torch module needs from_torch first
    with pytest.raises(heronlike.UnknownTargetError):
        hm.extract_tasks(hm.from_torch(net, (x,)), "no-such-target")
    if "avx512_vnni" not in cpu_flags():  # DL Boost named on a CPU without it
        with pytest.raises(HostFeatureError, match="VNNI"):
            hm.compile_model(hm.from_torch(net, (x,)), "dlboost")


def test_dynamic_batch_is_refused_then_bound() -> None:
    net, x = _model("cnn")
    batch = torch.export.Dim("batch", min=1, max=8)
    mod = hm.from_torch(net, (torch.randn(2, 3, 16, 16),), dynamic_shapes={"x": {0: batch}})
    with pytest.raises(SymbolicShapeError, match="batch") as err:
        hm.extract_tasks(mod, "llvm")
    name = err.value.dimension
    compiled = hm.compile_model(mod, "llvm", shapes={name: 2})
    xs = torch.randn(2, 3, 16, 16)
    np.testing.assert_allclose(compiled(xs.numpy()), _reference(net, xs), rtol=RTOL, atol=ATOL)
    with pytest.raises(heronlike.InvalidArgumentError, match="not a symbolic dimension"):
        hm.compile_model(mod, "llvm", shapes={"nope": 2})


def test_private_primfunc_is_tuned(tmp_path: Path) -> None:
    """A PrimFunc as Relax's FuseTIR leaves it (private, int64 extents, pad + bias + ReLU
    blocks) is a compute heronlike.tune accepts."""
    net, x = _model("cnn")
    tasks = hm.extract_tasks(hm.from_torch(net, (x,)), "llvm")
    conv = next(t for t in tasks if t.name.startswith("fused_conv2d_add_relu"))
    private = conv.func.without_attr("global_symbol")
    result = heronlike.tune(private, "llvm", trials=2, batch_size=2, records=tmp_path / "r.sqlite")
    assert result.latency_s is not None and result.correct


def test_workload_key_is_structural_and_legacy_records_are_found(tmp_path: Path) -> None:
    """Names do not change the key; a records file keyed the old way (TVMScript text hash) is
    still found by apply_best (its rows are renamed once)."""
    a = ComputeDAG.from_compute(ops.gemm(16, 16, 16, dtype="float32"))
    b = ComputeDAG.from_compute(a.func.with_attr("global_symbol", "other"))
    assert a.workload_key == b.workload_key
    records = tmp_path / "r.sqlite"
    compute = ops.gemm(16, 16, 16, dtype="float32")
    heronlike.tune(compute, "llvm", trials=2, batch_size=2, records=records)
    with sqlite3.connect(records) as db:
        for table in ("trials", "runs", "workloads"):
            db.execute(
                f"UPDATE {table} SET workload_key = ? WHERE workload_key = ?",
                (a.legacy_workload_key, a.workload_key),
            )
    kernel = heronlike.apply_best(records, compute, "llvm")
    x, w = np.ones((16, 16), "float32"), np.ones((16, 16), "float32")
    np.testing.assert_allclose(kernel(x, w), x @ w.T)
    with sqlite3.connect(records) as db:
        keys = {r[0] for r in db.execute("SELECT workload_key FROM trials")}
    assert keys == {a.workload_key}


def test_constant_weights_only_are_packed() -> None:
    """``layout_free_buffers`` (a model's constants) bounds which parameters may be packed."""
    dag = ComputeDAG.from_compute(ops.gemm(64, 64, 64, dtype="float32"))
    assert heronlike.generate_space(dag.func, "llvm").packed  # W packed when given alone
    frozen = dag.func.with_attr("layout_free_buffers", [])
    assert heronlike.generate_space(frozen, "llvm").packed == {}


def test_cli_model_tune_build_run(tmp_path: Path) -> None:
    net, x = _model("cnn")
    path = _onnx(net, x, tmp_path / "cnn.onnx")
    from click.testing import CliRunner

    from heronlike import cli

    # the commands in this process, one after the other as a user types them (each reads what
    # the one before wrote); tests/test_cli.py runs the installed console script itself
    records, lib = tmp_path / "r.sqlite", tmp_path / "cnn.so"
    run = lambda *a: CliRunner().invoke(cli.main, ["model", *a])  # noqa: E731
    out = run("tune", str(path), "--trials", "4", "--batch-size", "4", "--records", str(records))
    assert out.exit_code == 0, out.output
    assert "4 trials run" in out.stdout
    out = run("build", str(path), "--records", str(records), "-o", str(lib))
    assert out.exit_code == 0, out.output
    assert "tuned" in out.stdout
    out = run("run", str(lib), "--repeat", "3", "--profile")
    assert out.exit_code == 0, out.output
    assert "float32[1, 10]" in out.stdout and "finite True" in out.stdout
    # the tuned kernels' time in the model set beside their recorded time alone
    assert re.search(r"\d+\.\d\d  tuned ", out.stdout), out.stdout
    out = run("build", str(tmp_path / "missing.onnx"), "-o", str(lib))
    assert isinstance(out.exception, ModelImportError), out.output


def test_library_from_a_model(tmp_path: Path) -> None:
    """``library.build`` takes a model as its operator source: its tuned tasks become kernels
    of the library, checked against TVM's unscheduled build, callable by function name."""
    from heronlike import library

    net, x = _model("cnn")
    path = _onnx(net, x, tmp_path / "cnn.onnx")
    res = library.build(
        path, "llvm", trials=4, batch_size=4, out_dir=tmp_path / "lib", records=tmp_path / "r.db"
    )
    assert res.checked is True and len(res.manifest["kernels"]) == 1
    assert len(res.missing) == len(hm.extract_tasks(path, "llvm")) - 1  # only one was tuned
    lib = library.load(tmp_path / "lib")
    (kernel,) = lib.kernels
    assert kernel.op.startswith("fused_conv2d") and kernel.entry["checked"] is True
    xs = [np.random.default_rng(0).uniform(-1, 1, p.shape).astype(p.dtype) for p in kernel.inputs]
    assert lib.call(kernel.op, *xs).shape == kernel.outputs[0].shape


def test_packed_weights_are_constants_packed_once() -> None:
    """A kernel that takes a conv weight packed (PackVectorOperand) is called with the weight
    constant packed at compile time, under a new function; the model still matches PyTorch."""
    from heronlike.model.compile import schedule_module
    from heronlike.model.tasks import fused_module, tasks_of

    net, x = _model("cnn")
    fused, tgt = fused_module(hm.from_torch(net, (x,)), "llvm", shapes=None)
    tasks = tasks_of(fused, tgt)
    packed = [t for t in tasks if t.space is not None and t.space.packed]
    assert packed  # the convolutions' weights
    mod, choices = schedule_module(fused, tasks, None)
    names = {gv.name_hint for gv in mod.get_global_vars()}
    assert {f"{t.functions[0]}_packed" for t in packed} <= names
    assert all(c.source == "default" for c in choices)
