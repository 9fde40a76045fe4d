"""Model operator lists: which operators a model runs, at which shapes, how often.

A list is JSON (a file) or Python (a module with ``operators(batch=...)``, e.g.
``benchmarks/models/resnet50.py``); every entry is a :class:`Workload`::

    {"op": "conv2d", "shape": {"N": 1, "H": 56, "W": 56, "CI": 64, "CO": 64, "KH": 3,
     "KW": 3, "stride": 1, "pad": 1, "dilation": 1}, "dtype": "int8", "occurrences": 3}

``op`` is ``conv2d`` (NHWC activations, ``CO,KH,KW,CI`` weights: :func:`heronlike.ops.c2d`),
``gemm`` (``C = X @ W.T``, ``X (M, K)``, ``W (N, K)``), ``bmm`` or any other operator of
:data:`heronlike.ops.OPERATORS`; ``shape`` names the operator function's arguments (or lists
them in order); ``dtype`` is a :data:`heronlike.ops.DTYPES` name (``int8`` = uint8 activations x
int8 weights -> int32).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["ALIASES", "Workload", "load_operator_list", "merge_duplicates", "operator_function"]

#: operator names of model lists that are spelt differently in :mod:`heronlike.ops`
ALIASES = {"conv2d": "c2d", "matmul": "gemm", "dense": "gemm"}


def operator_function(op: str) -> tuple[Any, tuple[str, ...]]:
    """The :mod:`heronlike.ops` builder of ``op`` and the names of its shape arguments.

    Raises:
        InvalidArgumentError: an unknown operator.
    """
    from .. import ops

    name = ALIASES.get(op, op)
    if name == "c2d":
        return ops.c2d, ("N", "H", "W", "CI", "CO", "KH", "KW", "stride", "pad", "dilation")
    if name not in ops.OPERATORS:
        known = ", ".join(sorted({*ops.OPERATORS, *ALIASES, "c2d"}))
        raise InvalidArgumentError(f"unknown operator {op!r}; known: {known}")
    return ops.OPERATORS[name]


@dataclass(frozen=True)
class Workload:
    """One operator of a model at one shape.

    Attributes:
        op: operator name (``conv2d``, ``gemm``, ``bmm``, ... see the module docstring).
        shape: the operator function's arguments by name (extents, and for convolutions
            ``stride``, ``pad``, ``dilation``), defaults filled in; a tuple of pairs so the
            workload is hashable.
        dtype: :data:`heronlike.ops.DTYPES` name.
        occurrences: how many times the model runs it (>= 1).
        name: a label; default ``op`` and the shape.
    """

    op: str
    shape: tuple[tuple[str, int], ...]
    dtype: str = "int8"
    occurrences: int = 1
    name: str = ""

    @classmethod
    def create(
        cls,
        op: str,
        shape: Mapping[str, int] | Iterable[int],
        dtype: str = "int8",
        occurrences: int = 1,
        name: str = "",
    ) -> Workload:
        """Validate and normalise (defaults of the operator function filled in).

        Raises:
            InvalidArgumentError: unknown operator, shape argument or dtype; a count < 1.
        """
        from .. import ops

        fn, names = operator_function(op)
        sig = inspect.signature(fn).parameters
        if isinstance(shape, Mapping):
            unknown = sorted(set(shape) - set(names))
            if unknown:
                raise InvalidArgumentError(
                    f"{op}: unknown shape argument {', '.join(unknown)}; "
                    f"it takes {', '.join(names)}"
                )
            given = {k: shape[k] for k in names if k in shape}
        else:
            values = list(shape)
            if len(values) > len(names):
                raise InvalidArgumentError(f"{op} takes at most {len(names)} shape arguments")
            given = dict(zip(names, values))
        full: dict[str, int] = {}
        for k in names:
            if k in given:
                v = given[k]
            elif sig[k].default is not inspect.Parameter.empty:
                v = sig[k].default
            else:
                raise InvalidArgumentError(f"{op}: shape argument {k} is missing")
            if isinstance(v, bool) or not isinstance(v, int):
                raise InvalidArgumentError(f"{op}: {k} must be an integer, got {v!r}")
            full[k] = int(v)
        if dtype not in ops.DTYPES:
            raise InvalidArgumentError(f"dtype {dtype!r} is not one of {', '.join(ops.DTYPES)}")
        if isinstance(occurrences, bool) or not isinstance(occurrences, int) or occurrences < 1:
            raise InvalidArgumentError(f"occurrences must be an integer >= 1, got {occurrences!r}")
        canonical = "conv2d" if ALIASES.get(op, op) == "c2d" else ALIASES.get(op, op)
        return cls(canonical, tuple(full.items()), dtype, occurrences, name)

    @property
    def params(self) -> dict[str, int]:
        """The shape arguments as a dict."""
        return dict(self.shape)

    @property
    def label(self) -> str:
        """``name``, or ``op`` and the shape (e.g. ``conv2d N1 H56 W56 CI64 CO64 ...``)."""
        return self.name or f"{self.op}(" + ",".join(f"{k}={v}" for k, v in self.shape) + ")"

    @property
    def key(self) -> tuple[str, tuple[tuple[str, int], ...], str]:
        """What makes two workloads the same kernel (occurrences and name aside)."""
        return (self.op, self.shape, self.dtype)

    def compute(self, target: Any = None) -> list[Any]:
        """The ``te`` compute (inputs, then the output) of :mod:`heronlike.ops`; ``target``
        maps the dtype name (e.g. ``int8`` is signed x signed on TensorCore)."""
        from .. import ops

        fn, _ = operator_function(self.op)
        return fn(**self.params, dtype=ops.target_dtype(self.dtype, target))

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "shape": self.params,
            "dtype": self.dtype,
            "occurrences": self.occurrences,
            **({"name": self.name} if self.name else {}),
        }


def merge_duplicates(workloads: Iterable[Workload]) -> list[Workload]:
    """One workload per kernel (same op, shape, dtype), occurrences summed, first order kept."""
    out: dict[Any, Workload] = {}
    for w in workloads:
        if w.key in out:
            old = out[w.key]
            out[w.key] = Workload(
                old.op, old.shape, old.dtype, old.occurrences + w.occurrences, old.name
            )
        else:
            out[w.key] = w
    return list(out.values())


def _entries(data: Any, source: str) -> list[Workload]:
    if isinstance(data, Mapping):
        data = data.get("operators", data.get("workloads"))
    if not isinstance(data, list):
        raise InvalidArgumentError(
            f'{source}: expected a list of operators or {{"operators": [...]}}'
        )
    out = []
    for i, e in enumerate(data):
        if isinstance(e, Workload):
            out.append(e)
            continue
        if not isinstance(e, Mapping) or "op" not in e or "shape" not in e:
            raise InvalidArgumentError(f"{source}: entry {i} needs 'op' and 'shape': {e!r}")
        extra = sorted(set(e) - {"op", "shape", "dtype", "occurrences", "name"})
        if extra:
            raise InvalidArgumentError(f"{source}: entry {i} has unknown keys {extra}")
        out.append(
            Workload.create(
                e["op"],
                e["shape"],
                e.get("dtype", "int8"),
                e.get("occurrences", 1),
                e.get("name", ""),
            )
        )
    return out


def load_operator_list(
    source: str | Path | Iterable[Any], *, batch: int | None = None, dtype: str | None = None
) -> list[Workload]:
    """A model's operator list from a JSON file, a Python module or a list.

    Args:
        source: a ``.json`` file path; a module name with ``operators(batch=..., dtype=...)``
            (``resnet50`` means ``benchmarks.models.resnet50``, looked up from the current
            folder and the repository root); or a list of :class:`Workload` / dicts.
        batch: passed to a module's ``operators`` (its default when None); not used for JSON.
        dtype: overrides every entry's dtype when given.

    Raises:
        InvalidArgumentError: no such file or module, malformed entries.
    """
    if isinstance(source, str | Path) and (
        Path(source).suffix == ".json" or Path(source).is_file()
    ):
        path = Path(source)
        if not path.is_file():
            raise InvalidArgumentError(f"{path}: no such operator list file")
        try:
            data = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{path}: not valid JSON ({exc})") from None
        items = _entries(data, str(path))
    elif isinstance(source, str):
        module = _import_model(source)
        kwargs: dict[str, Any] = {}
        if batch is not None:
            kwargs["batch"] = batch
        items = _entries(module.operators(**kwargs), source)
    else:
        items = _entries(list(source), "operator list")
    if dtype is not None:
        items = [Workload.create(w.op, w.params, dtype, w.occurrences, w.name) for w in items]
    return items


def _import_model(name: str) -> Any:
    candidates = [name] if "." in name else [f"benchmarks.models.{name}", name]
    root = str(Path(__file__).resolve().parents[2])
    for extra in (str(Path.cwd()), root):
        if extra not in sys.path:
            sys.path.append(extra)
    for mod in candidates:
        try:
            module = importlib.import_module(mod)
        except ModuleNotFoundError:
            continue
        if hasattr(module, "operators"):
            return module
    raise InvalidArgumentError(
        f"no operator list {name!r}: not a JSON file, and no module {' or '.join(candidates)} "
        "with an operators(batch=...) function"
    )
