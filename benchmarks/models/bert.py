"""BERT-base (sequence 512) as batched matrix products.

Source: Heron's ``tests/figure10/configs/`` BERT list, ../shared/notes/heron_repo.md §7.3, given
there as ``BMM (B, M, K, N) x count`` at batch 16: ``16,512,768,768 x60`` (the dense layers,
one product per sequence), ``192,512,64,512 x12`` (Q @ K^T, 12 heads per sequence) and
``192,512,512,64 x12`` (attention @ V). Here ``B`` is ``batch`` for the dense layers and
``12 x batch`` for attention. :func:`heronlike.ops.bmm` computes ``C[b] = X[b] @ W[b].T`` with
``X (B, M, K)`` and ``W (B, N, K)``.
"""

from __future__ import annotations

HEADS = 12
SEQ = 512
HIDDEN = 768

#: (batch multiplier, M, K, N, occurrences)
BMMS = [
    (1, SEQ, HIDDEN, HIDDEN, 60),
    (HEADS, SEQ, HIDDEN // HEADS, SEQ, 12),
    (HEADS, SEQ, SEQ, HIDDEN // HEADS, 12),
]


def operators(batch: int = 1, dtype: str = "int8") -> list[dict]:
    """The operator list at ``batch`` (entries as in :mod:`benchmarks.models`)."""
    names = ("dense 768->768", "attention Q@K^T", "attention P@V")
    return [
        {
            "op": "bmm",
            "shape": dict(B=mult * batch, M=m, N=n, K=k),
            "dtype": dtype,
            "occurrences": count,
            "name": name,
        }
        for name, (mult, m, k, n, count) in zip(names, BMMS)
    ]
