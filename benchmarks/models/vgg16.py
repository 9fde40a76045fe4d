"""VGG-16 convolutions (all 3x3, stride 1, pad 1).

Source: Heron's ``tests/figure10/configs/`` VGG-16 list (batch 16 there; ``batch`` is a
parameter here), ../shared/notes/heron_repo.md §7.3: ``H, W, CI, CO`` with counts. Heron's list
has no fully-connected layers, so neither has this one. NHWC / ``CO,KH,KW,CI``
(:func:`heronlike.ops.c2d`).
"""

from __future__ import annotations

#: (H, W, CI, CO, occurrences)
CONVS = [
    (224, 224, 3, 64, 1),
    (224, 224, 64, 64, 1),
    (112, 112, 64, 128, 1),
    (112, 112, 128, 128, 2),
    (56, 56, 128, 256, 1),
    (56, 56, 256, 256, 3),
    (28, 28, 256, 512, 1),
    (28, 28, 512, 512, 3),
    (14, 14, 512, 512, 1),
    (7, 7, 512, 512, 3),
]


def operators(batch: int = 1, dtype: str = "int8") -> list[dict]:
    """The operator list at ``batch`` (entries as in :mod:`benchmarks.models`)."""
    return [
        {
            "op": "conv2d",
            "shape": dict(N=batch, H=h, W=w, CI=ci, CO=co, KH=3, KW=3, stride=1, pad=1, dilation=1),
            "dtype": dtype,
            "occurrences": n,
            "name": f"conv{i} {h}x{w}x{ci}->{co} k3",
        }
        for i, (h, w, ci, co, n) in enumerate(CONVS)
    ]
