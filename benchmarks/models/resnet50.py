"""ResNet-50 convolutions and the final fully-connected layer.

Source: Heron's ``tests/figure10/configs/`` ResNet-50 list (batch 16 there; here ``batch`` is a
parameter), as summarised in ../shared/notes/heron_repo.md §7.3: 20 distinct convolutions
``H, W, CI, CO, KH, KW, stride, pad`` (dilation 1) with their counts, and the classifier GEMM
``batch x 2048 -> 1000``. Layouts: NHWC activations, ``CO,KH,KW,CI`` weights
(:func:`heronlike.ops.c2d`); the GEMM is ``X (batch, 2048) @ W.T`` with ``W (1000, 2048)``.
"""

from __future__ import annotations

#: (H, W, CI, CO, KH, KW, stride, pad, occurrences), batch left out
CONVS = [
    (224, 224, 3, 64, 7, 7, 2, 3, 1),
    (56, 56, 64, 64, 1, 1, 1, 0, 1),
    (56, 56, 64, 64, 3, 3, 1, 1, 3),
    (56, 56, 64, 256, 1, 1, 1, 0, 4),
    (56, 56, 256, 64, 1, 1, 1, 0, 2),
    (56, 56, 256, 128, 1, 1, 2, 0, 1),
    (28, 28, 128, 128, 3, 3, 1, 1, 4),
    (56, 56, 256, 512, 1, 1, 2, 0, 1),
    (28, 28, 128, 512, 1, 1, 1, 0, 4),
    (28, 28, 512, 128, 1, 1, 1, 0, 3),
    (28, 28, 512, 256, 1, 1, 2, 0, 1),
    (14, 14, 256, 256, 3, 3, 1, 1, 6),
    (28, 28, 512, 1024, 1, 1, 2, 0, 1),
    (14, 14, 256, 1024, 1, 1, 1, 0, 6),
    (14, 14, 1024, 256, 1, 1, 1, 0, 5),
    (14, 14, 1024, 512, 1, 1, 2, 0, 1),
    (7, 7, 512, 512, 3, 3, 1, 1, 3),
    (14, 14, 1024, 2048, 1, 1, 2, 0, 1),
    (7, 7, 512, 2048, 1, 1, 1, 0, 3),
    (7, 7, 2048, 512, 1, 1, 1, 0, 2),
]

#: (K, N, occurrences) of the classifier: X (batch, K) @ W (N, K).T
GEMMS = [(2048, 1000, 1)]


def operators(batch: int = 1, dtype: str = "int8") -> list[dict]:
    """The operator list at ``batch`` (entries as in :mod:`benchmarks.models`)."""
    out = []
    for i, (h, w, ci, co, kh, kw, s, p, n) in enumerate(CONVS):
        shape = dict(N=batch, H=h, W=w, CI=ci, CO=co, KH=kh, KW=kw, stride=s, pad=p, dilation=1)
        out.append(
            {
                "op": "conv2d",
                "shape": shape,
                "dtype": dtype,
                "occurrences": n,
                "name": f"conv{i} {h}x{w}x{ci}->{co} k{kh} s{s} p{p}",
            }
        )
    for k, n_out, n in GEMMS:
        out.append(
            {
                "op": "gemm",
                "shape": dict(M=batch, N=n_out, K=k),
                "dtype": dtype,
                "occurrences": n,
                "name": f"fc {k}->{n_out}",
            }
        )
    return out
