"""Quantized PyTorch models to integer compute (issue 23): ``torch._int_mm`` and PT2E models
(``torchao.quantization.pt2e``, x86 recipe: u8 activations, s8 per-channel weights) imported by
:func:`heronlike.model.from_torch` and rewritten by :func:`heronlike.model.quantize.rewrite_qdq`.

The reference is PyTorch's own execution of the same quantized graph (dequantize -> float
operator -> quantize, as the ONNX specification also defines QDQ). Agreement: ``_int_mm``
bit-exact; the PT2E model's float output within 1e-5 of the output's range (its integer
products are exact; what differs is float rounding in the epilogues, and PyTorch quantizing by
multiplying with ``1 / scale`` where heronlike divides, which can flip a value lying on a .5
tie: the rule of ``tests/test_quantize.py`` allows that, these inputs do not hit one).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import heronlike.model as hm  # noqa: E402

TARGET = "llvm -num-cores=1"


class _IntMM(torch.nn.Module):
    def __init__(self, w: torch.Tensor | None) -> None:
        super().__init__()
        self.w = w

    def forward(self, x, w=None):  # noqa: ANN001, ANN201
        return torch._int_mm(x, self.w if w is None else w)


@pytest.mark.parametrize("constant_weight", [True, False], ids=["const", "var"])
def test_int_mm_is_bit_exact(constant_weight: bool) -> None:
    """``torch._int_mm`` (s8 x s8 -> s32) through the importer: the +128 shift, exact."""
    m, k, n = 32, 64, 48  # torch's CPU _int_mm wants m > 16 and k, n multiples of 8
    g = torch.Generator().manual_seed(0)
    x = torch.randint(-128, 128, (m, k), dtype=torch.int8, generator=g)
    w = torch.randint(-128, 128, (k, n), dtype=torch.int8, generator=g)
    net = _IntMM(w if constant_weight else None)
    args = (x,) if constant_weight else (x, w)
    compiled = hm.compile_model(hm.from_torch(net, args), TARGET)
    assert compiled.quantization["integer"] == [
        f"matmul [{m}, {n}]: int8 x s8 -> s32 (integer matmul)"
    ]
    got = compiled(*(a.numpy() for a in args))
    np.testing.assert_array_equal(got, net(*args).numpy())
    np.testing.assert_array_equal(got, x.numpy().astype(np.int64) @ w.numpy().astype(np.int64))


class _Net(torch.nn.Module):
    """Padded convolutions (one on an input with a non-zero zero point), a residual add,
    pooling and a linear layer whose output stays float (PT2E's x86 recipe)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.c2 = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = torch.relu(self.c1(x))
        y = torch.relu(self.c2(y)) + y
        return self.fc(y.mean((2, 3)))


def test_pt2e_model_runs_on_integer_compute() -> None:
    pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
    x86 = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")
    torch.manual_seed(0)
    net, shape = _Net().eval(), (1, 8, 8, 8)
    exported = torch.export.export(net, (torch.randn(*shape),)).module()
    quantizer = x86.X86InductorQuantizer()
    quantizer.set_global(x86.get_default_x86_inductor_quantization_config())
    prepared = pt2e.prepare_pt2e(exported, quantizer)
    for _ in range(4):
        prepared(torch.randn(*shape))
    quantized = pt2e.convert_pt2e(prepared)

    compiled = hm.compile_model(hm.from_torch(quantized, (torch.randn(*shape),)), TARGET)
    q = compiled.quantization
    assert len(q["integer"]) == 3 and not q["float"], q  # two convolutions and the linear
    assert any("zero point 0" not in line for line in q["integer"])  # a non-zero zero point
    x = torch.randn(*shape)
    got = compiled(x.numpy())
    want = quantized(x).detach().numpy()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    # and the quantized model stays near the float one
    assert np.abs(got - net(x).detach().numpy()).max() <= 0.1 * np.abs(want).max()


def test_pt2e_operators_outside_the_patterns_stay_float() -> None:
    """A dequantized activation times another activation is no weight layer: kept float and
    named; the result still equals PyTorch's."""

    class Products(torch.nn.Module):
        def forward(self, a, b):  # noqa: ANN001, ANN201
            qa = torch.ops.quantized_decomposed.quantize_per_tensor(
                a, 0.05, 128, 0, 255, torch.uint8
            )
            qb = torch.ops.quantized_decomposed.quantize_per_tensor(
                b, 0.05, 128, 0, 255, torch.uint8
            )
            da = torch.ops.quantized_decomposed.dequantize_per_tensor(
                qa, 0.05, 128, 0, 255, torch.uint8
            )
            db = torch.ops.quantized_decomposed.dequantize_per_tensor(
                qb, 0.05, 128, 0, 255, torch.uint8
            )
            return da @ db

    pytest.importorskip("torchao.quantization.pt2e")  # registers quantized_decomposed
    a, b = torch.randn(16, 32), torch.randn(32, 8)
    compiled = hm.compile_model(hm.from_torch(Products(), (a, b)), TARGET)
    assert compiled.quantization["float"] == [
        "matmul [16, 8]: both operands are activations (no constant weight)"
    ]
    np.testing.assert_allclose(
        compiled(a.numpy(), b.numpy()), Products()(a, b).numpy(), rtol=1e-5, atol=1e-5
    )
