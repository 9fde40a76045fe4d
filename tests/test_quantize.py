"""Quantized models to integer compute (issue 23): QDQ and MatMulInteger layers rewritten into
u8 x s8 -> s32 stages, checked against ONNX Runtime and numpy.

The agreement rule with ONNX Runtime: the quantized outputs (the final ``DequantizeLinear``'s
values divided by its scale) agree within 1 LSB on at least 99.9 % of the elements, against ONNX
Runtime's reference execution of the same file (graph optimizations off: each QDQ operator as the
ONNX specification defines it, the convolution in float32). The cause of any difference is the
rounding of a requantise step: the reference sums dequantized products in float32, whose
rounding error moves a value across a .5 tie now and then, where heronlike's int32 sum is exact;
one such flip can move later layers' values by 1 LSB too (ResNet-50: every output within 1 LSB,
79.5 % equal). The small models here are held to more: at least 99.9 % exactly equal. Against ONNX
Runtime's *fused* int8 kernels the rule holds on a CPU with AVX512-VNNI only: without VNNI,
its u8 x s8 kernels add pairs of products in saturating int16 (``vpmaddubsw``) and differ by
tens of LSB wherever a pair overflows (ONNX Runtime's quantization documentation, "when and why
do I need to try U8U8"). Even with VNNI its fused run is not its reference: on the small
transformer block it is up to 3 LSB from its own reference execution on 1.2 % of the elements
(AMD Zen 5, ONNX Runtime 1.32, 2026-11-27; heronlike equals the reference there), so against the
fused run the test asks that every element more than 1 LSB from it is one where the fused run is
more than 1 LSB from the reference too.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")

import tvm  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402
from onnxruntime.quantization import (  # noqa: E402
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)
from tvm import relax  # noqa: E402

import heronlike.model as hm  # noqa: E402
from heronlike.dla_targets.amx import host_has_amx  # noqa: E402
from heronlike.host import cpu_flags  # noqa: E402
from heronlike.model.quantize import rewrite_qdq  # noqa: E402

TARGET = "llvm -num-cores=1"


class _SmallCNN(torch.nn.Module):
    """Padded 3x3 convolutions (the first on an input with a non-zero zero point), a residual
    add, average pooling and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.c3 = torch.nn.Conv2d(16, 32, 1, stride=2)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y
        y = torch.relu(self.c3(y)).mean((2, 3))
        return self.fc(y)


class _Separable(torch.nn.Module):
    """A depthwise-separable block (MobileNet's): a grouped 3x3 convolution, one group per
    channel, between pointwise ones, with ReLU6."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 16, 1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.c2 = torch.nn.Conv2d(16, 8, 1)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = torch.nn.functional.relu6(self.c1(x))
        return self.c2(torch.nn.functional.relu6(self.dw(y)))


class _Block(torch.nn.Module):
    """A transformer encoder block: attention (2 heads), layer norm, GELU feed-forward."""

    def __init__(self) -> None:
        super().__init__()
        self.att = torch.nn.MultiheadAttention(32, 2, batch_first=True)
        self.l1 = torch.nn.Linear(32, 64)
        self.l2 = torch.nn.Linear(64, 32)
        self.norm = torch.nn.LayerNorm(32)

    def forward(self, x):  # noqa: ANN001, ANN201
        a, _ = self.att(x, x, x, need_weights=False)
        x = self.norm(x + a)
        return x + self.l2(torch.nn.functional.gelu(self.l1(x)))


class _Calibration(CalibrationDataReader):
    def __init__(self, shape: tuple[int, ...]) -> None:
        rng = np.random.default_rng(1)
        self._it = iter([{"x": rng.standard_normal(shape).astype("float32")} for _ in range(8)])

    def get_next(self):  # noqa: ANN201
        return next(self._it, None)


def _qdq(tmp_path: Path, net: torch.nn.Module, shape: tuple[int, ...]) -> tuple[Path, Path]:
    """The float ONNX file of ``net`` and its QDQ quantization (ONNX Runtime's tool: u8
    activations, s8 per-channel weights, as its documentation recommends for CPUs)."""
    torch.manual_seed(0)
    net = net.eval()
    fp32, int8 = tmp_path / "f.onnx", tmp_path / "q.onnx"
    torch.onnx.export(
        net,
        (torch.randn(*shape),),
        str(fp32),
        input_names=["x"],
        output_names=["y"],
        opset_version=17,
        dynamo=False,
    )
    quantize_static(
        str(fp32),
        str(int8),
        _Calibration(shape),
        quant_format=QuantFormat.QDQ,
        per_channel=True,
        activation_type=QuantType.QUInt8,
        weight_type=QuantType.QInt8,
    )
    return fp32, int8


def _ort(path: Path, x: np.ndarray, *, reference: bool) -> np.ndarray:
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    if reference:  # each operator as the ONNX specification defines it
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


def _output_scale(path: Path) -> float:
    """The scale of the model's last DequantizeLinear (one LSB of the output)."""
    model = onnx.load(str(path))
    last = [n for n in model.graph.node if n.op_type == "DequantizeLinear"][-1]
    init = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    return float(init[last.input[1]])


def assert_agrees(got: np.ndarray, want: np.ndarray, lsb: float) -> None:
    """The agreement rule of this file's docstring (with the small models' exactness)."""
    steps = np.abs(got.astype(np.float64) - want) / lsb
    assert (steps <= 1.0 + 1e-3).mean() >= 0.999, f"{steps.max():.2f} LSB apart"
    assert (steps < 0.5).mean() >= 0.999, f"only {(steps < 0.5).mean():.4%} equal"


@pytest.mark.parametrize(
    "net, shape, n_int, n_float",
    [
        (_SmallCNN, (1, 3, 16, 16), 4, 0),
        (_Separable, (1, 3, 16, 16), 3, 0),
        (_Block, (1, 8, 32), 4, 2),
    ],
    ids=["cnn", "depthwise", "transformer"],
)
def test_qdq_model_agrees_with_onnxruntime(tmp_path: Path, net, shape, n_int, n_float) -> None:  # noqa: ANN001
    fp32, int8 = _qdq(tmp_path, net(), shape)
    compiled = hm.compile_model(int8, TARGET)
    q = compiled.quantization
    assert len(q["integer"]) == n_int, q
    assert len(q["float"]) == n_float, q
    for line in q["float"]:  # the attention products of two activations stay float
        assert "both operands are activations" in line
    assert "integer" in compiled.summary()
    x = np.random.default_rng(7).standard_normal(shape).astype("float32")
    got = compiled(x)
    lsb = _output_scale(int8)
    reference = _ort(int8, x, reference=True)
    assert_agrees(got, reference, lsb)
    if {"avx512_vnni"} <= cpu_flags():
        # against ONNX Runtime's fused kernels: wherever we are more than 1 LSB from them,
        # so are they from their own reference execution (the difference is theirs)
        fused = _ort(int8, x, reference=False)
        ours_off = np.abs(got.astype(np.float64) - fused) / lsb > 1 + 1e-3
        theirs_off = np.abs(fused.astype(np.float64) - reference) / lsb > 1 + 1e-3
        assert not (ours_off & ~theirs_off).any(), f"{ours_off.sum()} elements > 1 LSB apart"
    # the quantized model stays close to the float model: within 8 % of the output's range
    want = _ort(fp32, x, reference=True)
    assert np.abs(got - want).max() <= 0.08 * np.abs(want).max()


def test_layers_that_differ_only_in_scales_share_a_task(tmp_path: Path) -> None:
    """Two transformer blocks of one shape make (almost) no more tasks than one: per-layer
    scales and zero points are kernel parameters, not immediates (with immediates each layer
    was a task of its own: 31 tasks for two blocks, 173 for BERT-base)."""
    shape = (1, 8, 32)
    (tmp_path / "1").mkdir()
    (tmp_path / "2").mkdir()
    one = hm.extract_tasks(_qdq(tmp_path / "1", _Block(), shape)[1], TARGET)
    torch.manual_seed(1)
    two = hm.extract_tasks(
        _qdq(tmp_path / "2", torch.nn.Sequential(_Block(), _Block()), shape)[1], TARGET
    )
    # +1: ONNX Runtime's tool leaves the second block's attention output bias in float
    # ("bias of Gemm ... is not constant"), so that layer's epilogue has one more add
    assert len(two) <= len(one) + 1, [t.name for t in two]
    shared = [t for t in two if t.weight >= 2]
    assert len(shared) >= len(one) - 2, [(t.name, t.weight) for t in two]


def test_integer_layers_reach_the_rules_as_u8_s8_reductions(tmp_path: Path) -> None:
    _, int8 = _qdq(tmp_path, _SmallCNN(), (1, 3, 16, 16))
    tasks = hm.extract_tasks(int8, TARGET)
    convs = [t for t in tasks if "conv2d" in t.name]
    assert len(convs) == 3 and all(t.tunable for t in convs)
    for task in convs:
        script = task.func.script()
        assert '"uint8"' in script and '"int8"' in script
        assert "conv2d_nhwc" in script  # channels-last, as the rules want it


def test_integer_layers_tensorize_onto_vnni_with_the_requantise_fused(tmp_path: Path) -> None:
    """On a VNNI CPU (built for Cascade Lake here, never run) the ``llvm`` target puts a
    quantized model's integer layers onto ``vpdpbusd``, each with its requantise epilogue in
    the same kernel, and tunes the rest (small channel counts, element-wise) with the general
    rule set: every task of the model has a space."""
    from benchmarks.metaschedule import asm_uses, executable_asm
    from heronlike.sampler import RandSAT

    _, int8 = _qdq(tmp_path, _SmallCNN(), (1, 3, 16, 16))
    tasks = hm.extract_tasks(int8, {"kind": "dlboost", "general": True, "mcpu": "cascadelake"})
    assert all(t.tunable for t in tasks), [t.reason for t in tasks if not t.tunable]
    vnni = []
    for task in tasks:
        steps = [s.op for s in task.space.template.steps]
        if "tensorize" not in steps:
            continue
        (assignment,) = RandSAT(task.space.csp, seed=0).sample(1)
        target = tvm.target.Target(task.space.target.tvm_target())
        asm = executable_asm(tvm.compile(task.space.program(assignment), target=target))
        assert asm is not None and asm_uses(asm), task.name
        assert "_tir_round" in task.name.split(" ")[0], task.name  # requantised in the kernel
        vnni.append(task.name)
    # the 16 -> 16 and 16 -> 32 convolutions and the linear layer; the 3-channel input's
    # convolution goes to the general rule set
    assert len(vnni) == 3, [t.name for t in tasks]


def _matmul_module(x_dtype: str, w: np.ndarray | None, m: int, k: int, n: int) -> tvm.IRModule:
    """``main(x[, w]) = matmul(x, w, out_dtype=int32)``, ``w`` a constant when given."""
    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((m, k), x_dtype))
    params = [x]
    if w is None:
        wv = relax.Var("w", relax.TensorType((k, n), "int8"))
        params.append(wv)
    else:
        wv = relax.const(w, "int8")
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(relax.op.matmul(x, wv, out_dtype="int32"))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("constant_weight", [True, False], ids=["const", "var"])
def test_s8_s8_gemm_is_bit_exact(constant_weight: bool) -> None:
    """s8 x s8 (``torch._int_mm``) goes to u8 x s8 by the +128 shift, exactly."""
    m, k, n = 16, 64, 48
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (m, k)).astype(np.int8)
    w = rng.integers(-128, 128, (k, n)).astype(np.int8)
    mod = _matmul_module("int8", w if constant_weight else None, m, k, n)
    rewritten, report = rewrite_qdq(mod)
    assert report.rewritten == ["matmul [16, 48]: int8 x s8 -> s32 (integer matmul)"]
    assert "uint8" in rewritten["main"].script()
    compiled = hm.compile_model(mod, TARGET)
    got = compiled(x) if constant_weight else compiled(x, w)
    np.testing.assert_array_equal(got, x.astype(np.int64) @ w.astype(np.int64))


def test_matmul_integer_is_exact(tmp_path: Path) -> None:
    """``DynamicQuantizeLinear`` + ``MatMulInteger`` (what ``quantize_dynamic`` writes): the
    widened int32 x int32 product becomes u8 x s8 with a runtime zero-point term, exact against
    the ONNX specification. ONNX Runtime's own ``MatMulInteger`` kernel is compared on VNNI
    hosts only: without VNNI it saturates (here up to 16026 off in int32, even with graph
    optimizations off)."""
    m, k, n = 8, 64, 32
    w = np.random.default_rng(4).integers(-128, 128, (k, n)).astype(np.int8)
    graph = helper.make_graph(
        [
            helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
            helper.make_node("MatMulInteger", ["xq", "w", "xz"], ["y"]),
        ],
        "mmi",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.INT32, [m, n])],
        [onnx.numpy_helper.from_array(w, "w")],
    )
    path = tmp_path / "mmi.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    compiled = hm.compile_model(path, TARGET)
    assert len(compiled.quantization["integer"]) == 1
    x = np.random.default_rng(5).standard_normal((m, k)).astype("float32")
    got = compiled(x)
    # numpy, from the ONNX specification of both operators
    lo, hi = min(0.0, float(x.min())), max(0.0, float(x.max()))
    scale = np.float32((hi - lo) / 255)
    zero = np.clip(np.round(-lo / scale), 0, 255)
    xq = np.clip(np.round(x / scale) + zero, 0, 255).astype(np.int64)
    np.testing.assert_array_equal(got, (xq - zero.astype(np.int64)) @ w.astype(np.int64))
    if {"avx512_vnni"} <= cpu_flags():  # ONNX Runtime's kernel saturates without VNNI
        np.testing.assert_array_equal(got, _ort(path, x, reference=True))


def test_dynamic_layers_that_differ_only_in_scales_share_a_task(tmp_path: Path) -> None:
    """``quantize_dynamic`` scales each ``MatMulInteger`` product by ``x_scale · w_scale``, the
    weight scale a scalar constant: it is a kernel parameter, not an immediate, so two linear
    layers of one shape (different weights, different scales) are one task (they were two, and
    BERT-base had 91 tasks, not 23); the model's output stays within quantization error of the
    float model's."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(32, 32), torch.nn.Linear(32, 32)).eval()
    fp32, int8 = tmp_path / "f.onnx", tmp_path / "d.onnx"
    x = np.random.default_rng(6).standard_normal((4, 32)).astype("float32")
    torch.onnx.export(
        net, (torch.from_numpy(x),), str(fp32), input_names=["x"], output_names=["y"],
        opset_version=17, dynamo=False,
    )  # fmt: skip
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8)
    tasks = hm.extract_tasks(int8, TARGET)
    gemms = [t for t in tasks if "matmul" in t.name]
    assert [t.weight for t in gemms] == [2], [(t.name, t.weight) for t in tasks]
    compiled = hm.compile_model(int8, TARGET)
    assert len(compiled.quantization["integer"]) == 2
    want = _ort(fp32, x, reference=True)
    assert np.abs(compiled(x) - want).max() <= 0.05 * np.abs(want).max()


def test_float_model_is_untouched() -> None:
    mod = _matmul_module("uint8", np.ones((8, 4), np.int8), 2, 8, 4)  # already u8 x s8
    rewritten, report = rewrite_qdq(mod)
    assert not report.rewritten and not report.kept_float
    tvm.ir.assert_structural_equal(rewritten, mod)


@pytest.mark.parametrize(
    "target",
    [
        "amx -emulate -num-cores=1",
        pytest.param(
            "amx -num-cores=1",
            marks=pytest.mark.skipif(not host_has_amx(), reason="needs a CPU with AMX tiles"),
        ),
    ],
    ids=["emulated", "tiles"],
)
def test_qdq_cnn_on_amx_tiles_agrees_with_onnxruntime(target: str, tmp_path: Path) -> None:
    """The same QDQ CNN on the AMX target: its integer convolutions run the tile micro-kernels
    (``-emulate``: their loop nests, on any CPU; else the tiles of an AMX CPU) with the
    requantise fused, the rest TVM's lowering, and the output agrees with ONNX Runtime's
    reference by the same rule."""
    _, int8 = _qdq(tmp_path, _SmallCNN(), (1, 3, 16, 16))
    tiled = [t for t in hm.extract_tasks(int8, target) if t.tunable]
    assert len(tiled) == 4  # three convolutions and the linear layer
    for task in tiled:
        template = str(task.space.template)
        assert "heronlike_amx_" in template and "_tir_round" in task.name, task.name
    compiled = hm.compile_model(int8, target)
    assert sum(c.source != "tvm" for c in compiled.choices) == 4, compiled.summary()
    x = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype("float32")
    assert_agrees(compiled(x), _ort(int8, x, reference=True), _output_scale(int8))
