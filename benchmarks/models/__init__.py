"""Model operator lists (Heron, ASPLOS'23, Fig. 10 configs; ../shared/notes/heron_repo.md §7.3).

Each module has ``operators(batch=1, dtype="int8") -> list[dict]``: one entry per distinct layer
shape, ``{"op", "shape", "dtype", "occurrences", "name"}``, as :func:`heronlike.library.build`
and ``heronlike library build resnet50`` take them. ``MODELS`` names them.
"""

from __future__ import annotations

MODELS = ("resnet50", "vgg16", "bert")
