"""Model importers: a PyTorch module or an ONNX file into a TVM Relax ``IRModule``.

Both go through TVM's own frontends (``tvm.relax.frontend.torch.from_exported_program`` after
``torch.export``, and ``tvm.relax.frontend.onnx.from_onnx``); weights are bound as constants, so
the compiled model can pre-pack them once (:mod:`heronlike.model.compile`). A Relax
``IRModule`` a user built is taken as it is (:func:`as_relax`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import tvm
from tvm import relax

from ..errors import (
    InvalidArgumentError,
    ModelImportError,
    SymbolicShapeError,
    UnsupportedOperatorError,
)
from .torch_quantized import CONVERTERS

__all__ = ["as_relax", "bind_shapes", "from_onnx", "from_torch", "load_model_spec", "symbolic_dims"]


def from_torch(
    module: Any,
    example_args: Sequence[Any],
    *,
    dynamic_shapes: Any = None,
) -> tvm.IRModule:
    """Import a PyTorch ``nn.Module`` through ``torch.export`` and TVM's exported-program
    frontend.

    Args:
        module: a ``torch.nn.Module`` (put in eval mode here), including a PT2E-quantized one
            (``convert_pt2e``'s graph module: its ``quantized_decomposed`` operators and
            ``torch._int_mm`` are converted by :mod:`heronlike.model.torch_quantized`), or a
            ``torch.export.ExportedProgram`` (exported already; ``example_args`` unused).
        example_args: example inputs (``torch.Tensor``), one per ``forward`` argument.
        dynamic_shapes: passed to ``torch.export.export`` (e.g. ``{"x": {0:
            torch.export.Dim("batch")}}``); symbolic dimensions must be bound with
            ``shapes={"batch": 1}`` before tuning (:func:`bind_shapes`).

    Returns:
        A Relax ``IRModule`` whose ``main`` takes the inputs; weights are constants.

    Raises:
        ModelImportError: torch is not installed, ``module`` is neither, or
            ``torch.export`` fails.
        UnsupportedOperatorError: TVM's frontend has no converter for an operator (named).
    """
    try:
        import torch
    except ImportError as exc:
        raise ModelImportError("from_torch needs PyTorch: pip install torch") from exc
    from tvm.relax.frontend.torch import from_exported_program

    if isinstance(module, torch.export.ExportedProgram):
        program, module = module, module.module()
    elif isinstance(module, torch.nn.Module):
        try:
            module = module.eval()
        except NotImplementedError:  # PT2E's converted graph modules refuse eval()
            pass
        try:
            with torch.no_grad():
                program = torch.export.export(
                    module, tuple(example_args), dynamic_shapes=dynamic_shapes
                )
        except Exception as exc:  # noqa: BLE001 - torch.export raises many kinds
            raise ModelImportError(f"torch.export failed: {_first_line(exc)}") from exc
    else:
        raise ModelImportError(
            f"from_torch needs a torch.nn.Module or ExportedProgram, got {type(module).__name__}"
        )
    try:
        mod = from_exported_program(program, custom_convert_map=dict(CONVERTERS))
    except AssertionError as exc:  # the frontend asserts on ops it has no converter for
        ops = tuple(re.findall(r"'?([\w.]+\.(?:default|Tensor|int|Scalar))'?", str(exc)))
        raise UnsupportedOperatorError(
            f"TVM's PyTorch frontend cannot convert {', '.join(ops) or _first_line(exc)}",
            operators=ops,
        ) from exc
    names = _dim_names(module, mod, dynamic_shapes)
    return mod.with_attr(DIM_NAMES_ATTR, names) if names else mod


#: IRModule attribute: the user's names of symbolic dimensions (``torch.export.Dim("batch")``)
#: by the name TVM's import gave them (torch's symbols, ``s77``)
DIM_NAMES_ATTR = "heronlike.dim_names"


def _dim_names(module: Any, mod: tvm.IRModule, dynamic_shapes: Any) -> dict[str, str]:
    """``{"batch": "s77"}``: each ``torch.export.Dim`` of ``dynamic_shapes`` by the symbol it
    became in ``main``'s parameter shapes."""
    if not dynamic_shapes:
        return {}
    if isinstance(dynamic_shapes, Mapping):
        import inspect

        order = list(inspect.signature(module.forward).parameters)
        specs = [dynamic_shapes.get(name) for name in order]
    else:
        specs = list(dynamic_shapes)
    out: dict[str, str] = {}
    for param, spec in zip(mod["main"].params, specs):
        dims = spec.items() if isinstance(spec, Mapping) else enumerate(spec or ())
        values = param.ty.shape.values
        for axis, dim in dims:
            name = getattr(dim, "__name__", None)
            if name and not isinstance(values[int(axis)], tvm.tirx.IntImm):
                out[name] = str(values[int(axis)])
    return out


def from_onnx(
    model: str | Path | Any,
    *,
    shapes: Mapping[str, Sequence[int]] | None = None,
    opset: int | None = None,
) -> tvm.IRModule:
    """Import an ONNX model (a path or an ``onnx.ModelProto``) with TVM's ONNX frontend.

    Args:
        model: a ``.onnx`` file or a loaded ``onnx.ModelProto``.
        shapes: input shapes by input name, for inputs whose ONNX shape is symbolic (optional).
        opset: the opset to import at (default: the model's).

    Returns:
        A Relax ``IRModule``; initializers are bound as constants.

    Raises:
        ModelImportError: onnx is not installed (``pip install "heronlike[models]"``), the file
            is missing or is not an ONNX model.
        UnsupportedOperatorError: an operator TVM's ONNX frontend has no converter for (named).
    """
    try:
        import onnx
    except ImportError as exc:
        raise ModelImportError(
            'from_onnx needs the onnx package: pip install "heronlike[models]"'
        ) from exc
    from tvm.relax.frontend.onnx import from_onnx as _from_onnx

    if isinstance(model, str | Path):
        path = Path(model)
        if not path.is_file():
            raise ModelImportError(f"{path}: no such ONNX file")
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
            raise ModelImportError(f"{path}: not an ONNX model ({_first_line(exc)})") from exc
    if not isinstance(model, onnx.ModelProto):
        raise ModelImportError(
            f"from_onnx needs a path or an onnx.ModelProto, got {type(model).__name__}"
        )
    try:
        from tvm.relax.frontend.onnx.onnx_frontend import _get_convert_map

        known = set(_get_convert_map())
    except Exception:  # noqa: BLE001 - a private helper; only used for a better message
        known = None
    if known is not None:
        missing = sorted({n.op_type for n in model.graph.node if n.op_type not in known})
        if missing:
            raise UnsupportedOperatorError(
                f"TVM's ONNX frontend cannot convert the operator(s) {', '.join(missing)}",
                operators=tuple(missing),
            )
    try:
        return _from_onnx(model, shape_dict=dict(shapes) if shapes else None, opset=opset)
    except tvm.error.OpNotImplemented as exc:
        raise UnsupportedOperatorError(_first_line(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - the frontend raises many kinds
        raise ModelImportError(f"TVM's ONNX frontend failed: {_first_line(exc)}") from exc


def as_relax(model: Any, *, shapes: Mapping[str, int] | None = None) -> tvm.IRModule:
    """The Relax ``IRModule`` of ``model``: an ``IRModule`` as it is, an ``.onnx`` path or an
    ``onnx.ModelProto`` through :func:`from_onnx`; symbolic dimensions bound by ``shapes``.

    Raises:
        ModelImportError: an unreadable model; InvalidArgumentError: a model of another type
            (a PyTorch module must go through :func:`from_torch`, which needs example inputs).
    """
    if isinstance(model, tvm.IRModule):
        mod = model
    elif isinstance(model, str | Path):
        if Path(model).suffix != ".onnx":
            raise ModelImportError(f"{model}: not an .onnx file")
        mod = from_onnx(model)
    elif type(model).__name__ == "ModelProto":
        mod = from_onnx(model)
    else:
        raise InvalidArgumentError(
            "model must be a Relax IRModule, an .onnx path or an onnx.ModelProto (a PyTorch "
            f"module: heronlike.model.from_torch(module, example_args)); got {type(model).__name__}"
        )
    if "main" not in [gv.name_hint for gv in mod.get_global_vars()]:
        raise ModelImportError("the Relax module has no 'main' function")
    mod = bind_shapes(mod, shapes) if shapes else mod
    check_static(mod)
    return mod


def load_model_spec(spec: str | Path) -> tvm.IRModule:
    """The Relax module of a model named on a command line: an ``.onnx`` file, or
    ``MODULE:FUNCTION`` (``MODULE`` a dotted module name or a ``.py`` file) where ``FUNCTION()``
    returns ``(torch_module, example_args)`` (or a Relax ``IRModule``).

    Raises:
        ModelImportError: a missing file or module, a function that does not exist or returns
            something else, and every import error of :func:`from_onnx` / :func:`from_torch`.
    """
    import importlib
    import importlib.util

    text = str(spec)
    if text.endswith(".onnx"):
        return from_onnx(text)
    if ":" not in text:
        raise ModelImportError(
            f"{text!r}: a model is an .onnx file or MODULE:FUNCTION returning a PyTorch module "
            "and its example inputs"
        )
    where, _, name = text.rpartition(":")
    try:
        if where.endswith(".py"):
            path = Path(where)
            if not path.is_file():
                raise ModelImportError(f"{path}: no such file")
            loader_spec = importlib.util.spec_from_file_location(path.stem, path)
            module = importlib.util.module_from_spec(loader_spec)  # type: ignore[arg-type]
            loader_spec.loader.exec_module(module)  # type: ignore[union-attr]
        else:
            module = importlib.import_module(where)
    except ModelImportError:
        raise
    except Exception as exc:  # noqa: BLE001 - whatever the user's module raises
        raise ModelImportError(f"cannot import {where}: {_first_line(exc)}") from exc
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ModelImportError(f"{where} has no function {name!r}")
    made = fn()
    if isinstance(made, tvm.IRModule):
        return made
    if not (isinstance(made, tuple) and len(made) == 2):
        raise ModelImportError(
            f"{text}: must return (torch module, example inputs) or a Relax IRModule, "
            f"got {type(made).__name__}"
        )
    return from_torch(made[0], made[1])


def bind_shapes(mod: tvm.IRModule, shapes: Mapping[str, int]) -> tvm.IRModule:
    """Bind symbolic dimensions (e.g. a dynamic batch ``{"batch": 1}``) to concrete values with
    Relax's ``BindSymbolicVars``.

    Raises:
        InvalidArgumentError: a name that is no symbolic dimension of ``main``, or a value that
            is not a positive integer.
    """
    known = _symbolic_names(mod["main"])
    alias = _aliases(mod)
    shapes = {alias.get(name, name): value for name, value in shapes.items()}
    for name, value in shapes.items():
        if name not in known:
            raise InvalidArgumentError(
                f"shapes: {name!r} is not a symbolic dimension of the model "
                f"(it has {', '.join(sorted(known)) or 'none'})"
            )
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"shapes: {name} must be an integer >= 1, got {value!r}")
    bound = relax.transform.BindSymbolicVars(dict(shapes), "main")(mod)
    return relax.transform.CanonicalizeBindings()(bound)


def _aliases(mod: tvm.IRModule) -> dict[str, str]:
    attrs = mod.attrs
    if attrs is None or DIM_NAMES_ATTR not in attrs:
        return {}
    return {str(k): str(v) for k, v in attrs[DIM_NAMES_ATTR].items()}


def check_static(mod: tvm.IRModule) -> None:
    """Raise :class:`SymbolicShapeError` naming the first input of ``main`` with a symbolic
    dimension (by the user's name for it, e.g. ``batch``, where the importer knows it)."""
    user = {v: k for k, v in _aliases(mod).items()}
    for p in mod["main"].params:
        shape = getattr(p.ty, "shape", None)
        for axis, d in enumerate(getattr(shape, "values", None) or ()):
            if not isinstance(d, tvm.tirx.IntImm):
                name = user.get(str(d), str(d))
                raise SymbolicShapeError(
                    f"dimension {axis} of input {p.name} is symbolic ({name}): heronlike tunes "
                    f"and compiles concrete shapes; pass shapes={{{name!r}: ...}}",
                    dimension=name,
                )


def symbolic_dims(mod: tvm.IRModule) -> list[str]:
    """Names of the symbolic dimensions of ``main``'s parameters (e.g. ``["batch"]``)."""
    user = {v: k for k, v in _aliases(mod).items()}
    return sorted(user.get(n, n) for n in _symbolic_names(mod["main"]))


def _symbolic_names(func: Any) -> set[str]:
    names: set[str] = set()
    for p in func.params:
        shape = getattr(p.ty, "shape", None)
        for d in getattr(shape, "values", None) or ():
            if not isinstance(d, tvm.tirx.IntImm):
                names |= {v.name for v in tvm.tirx.analysis.undefined_vars(d)}
    return names


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
