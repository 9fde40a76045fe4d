"""Tensor intrinsics and the tensorize pattern match (Heron ASPLOS'23 §4, Rule-S1).

An :class:`Intrinsic` describes a DLA's matrix instruction as ``C[m, n] += A[m, k] * B[n, k]``
with a fixed shape ``m × n × k`` and operand dtypes. :func:`match_intrinsic` maps a stage's
multiply-accumulate onto it: each stage axis gets a role by the buffers it indexes

============  ===========================  ==========================
role          indexes                      example (GEMM ``C[i,j] += X[i,k]*W[j,k]``)
============  ===========================  ==========================
``m``         C and A, not B               ``i``
``n``         C and B, not A               ``j``
``k``         A and B (reduce)             ``k``
batch         C, A and B                   ``b`` in BMM
============  ===========================  ==========================

and the innermost axis of each role is tiled by the intrinsic's extent for that role.
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from .dag import Access, Stage


@functools.cache
def import_tvmscript_module(name: str) -> ModuleType:
    """Import module ``name``, one that defines many TVMScript functions (TVM's tensor
    intrinsics: ``"tvm.s_tir.tensor_intrin.cuda"``), in about a sixth of the time a plain
    ``import`` takes; once per process.

    Importing any of TVM 0.27's ``tvm.s_tir.tensor_intrin`` modules imports all of them: about
    550 TVMScript functions, each decorated through ``inspect.stack()``. For a frame of a file
    that does not exist (``<frozen importlib._bootstrap>``, every import's own frames),
    ``inspect.getmodule`` scans all of ``sys.modules`` again on every call: 34 s of a 34 s
    import on an Intel Xeon (2026-11-29), paid by the tuning process and by every build worker
    of a TensorCore tune. During the import those look-ups are answered once per file name
    (the answer cannot change while it runs): 5.9 s.

    Raises:
        ModuleNotFoundError: no such module.
    """
    plain = inspect.getmodule
    known: dict[str, ModuleType | None] = {}

    def getmodule(obj: object, _filename: str | None = None) -> ModuleType | None:
        if _filename is None or not _filename.startswith("<"):
            return plain(obj, _filename)
        if _filename not in known:
            known[_filename] = plain(obj, _filename)
        return known[_filename]

    inspect.getmodule = getmodule
    try:
        return importlib.import_module(name)
    finally:
        inspect.getmodule = plain


@dataclass(frozen=True)
class Intrinsic:
    """A tensor intrinsic: ``C[m, n] += A[m, k] * B[n, k]`` over an ``m × n × k`` tile.

    Attributes:
        name: the name the intrinsic is registered under with ``tvm.s_tir.TensorIntrin``.
        m, n, k: tile extents (a 1-row intrinsic has ``m == 1``).
        a_dtype, b_dtype, c_dtype: operand dtypes, e.g. ``"uint8"``, ``"int8"``, ``"int32"``.
        pack_b: the B operand must be stored as contiguous ``n × k`` tiles
            (``B[.., n/N, k/K, N, K]``), the "packed weight layout" of DL Boost.
        register: registers the TVM ``TensorIntrin`` (idempotent); called before tensorize.
        group: for an intrinsic that is a group of instructions (TensorCore WMMA: fill, load
            A, load B, multiply-accumulate, store), the registered ``TensorIntrin`` name of
            each member by role: ``"fill"``, ``"load_a"``, ``"load_b"``, ``"compute"``
            (``name`` itself), ``"store"``; empty for a one-instruction intrinsic (VNNI).
        scopes: the storage scope each operand of the group lives in while the compute
            member runs, by role ``"a"``, ``"b"``, ``"c"`` (e.g. ``"wmma.matrix_a"``,
            ``"wmma.accumulator"``), and ``"staging"``: the scratchpad its loads read from
            (``"shared.dyn"``); empty when operands stay where they are.
        fragment_layout: for a group whose fragments are ordinary registers spread over a
            warp (``"warp"`` scope: ``ldmatrix`` + ``mma.sync``), the index map ``(row, col)
            -> (thread, element)`` of one ``m × k`` / ``n × k`` / ``m × n`` fragment tile
            (e.g. TVM's ``shared_16x16_to_ldmatrix_32x8_layout``): the rules re-lay the
            fragment buffers by it before tensorizing; None for opaque fragments (WMMA).
        pack_tile: the ``(n, k)`` tile of the packed B layout when it differs from the
            intrinsic's own ``n × k`` (AMX reads its ``16 × 64`` int8 B tile from DL Boost's
            ``16 × 4`` packed layout: rows of ``16 × 4`` bytes, one per 4 values of ``k``); None
            means ``(n, k)``. With it, the packed weight's outer dimensions are ordered
            ``(others, n, k)`` whatever the weight's own order, so the ``k`` tiles of one ``n``
            block are contiguous.
        register_tiles: for a target with a small register file of matrix tiles (AMX: 8 tiles
            of 16 rows × 64 bytes), how many tiles one call holds per operand role ``"a"``,
            ``"b"``, ``"c"``; the target's
            :class:`~heronlike.rules.tensorize.RegisterTileBudget` sums them. Empty otherwise.
        a_storage_dtype: the dtype the registered implementation reads A in when it differs
            from :attr:`a_dtype` (``"int16"``: AVX2's ``vpmaddwd`` broadcasts pre-widened
            pairs of a u8 operand); the stage is matched on :attr:`a_dtype` and
            :class:`~heronlike.rules.widen.WidenOperand` gives it a copy of A in this dtype
            (exact: every ``a_dtype`` value fits). None: A is read as it is.
        widened_in_call: the operand roles (``"a"``, ``"b"``) the registered implementation
            widens in every call before it multiplies (``vpmovsxbw`` / ``vpmovzxbw`` ahead of
            AVX2's ``vpmaddwd``): instructions each call issues beside the multiply, which the
            schedule feature ``s.tile.widens`` counts per call of a register tile
            (:mod:`heronlike.features`). Empty: operands are multiplied as loaded (VNNI).
    """

    name: str
    m: int
    n: int
    k: int
    a_dtype: str
    b_dtype: str
    c_dtype: str
    pack_b: bool = False
    register: Callable[[], None] = field(default=lambda: None, compare=False, repr=False)
    group: Mapping[str, str] = field(default_factory=dict, compare=False)
    scopes: Mapping[str, str] = field(default_factory=dict, compare=False)
    fragment_layout: Callable[[Any, Any], tuple[Any, Any]] | None = field(
        default=None, compare=False, repr=False
    )
    pack_tile: tuple[int, int] | None = None
    register_tiles: Mapping[str, int] = field(default_factory=dict, compare=False)
    a_storage_dtype: str | None = None
    widened_in_call: tuple[str, ...] = ()

    @property
    def signature(self) -> str:
        return f"{self.a_dtype} x {self.b_dtype} -> {self.c_dtype}"

    @property
    def packed_tile(self) -> tuple[int, int]:
        """The ``(n, k)`` tile of the packed B layout (:attr:`pack_tile` or ``(n, k)``)."""
        return self.pack_tile or (self.n, self.k)


def shape_family(intrinsics: Sequence[Intrinsic], intrinsic: Intrinsic) -> list[Intrinsic]:
    """The intrinsics of ``intrinsics`` that compute what ``intrinsic`` computes at another
    ``m × n`` shape: the same operand dtypes (and storage dtype of A), the same ``k`` and
    packed B layout, and the same
    kind (instruction groups with groups, one-instruction intrinsics with their like), in the
    target's order. Tuning chooses among them with a knob (the ``<stage>.intrinsic`` variable).
    """
    return [
        i
        for i in intrinsics
        if bool(i.group) == bool(intrinsic.group)
        and (i.a_dtype, i.b_dtype, i.c_dtype)
        == (intrinsic.a_dtype, intrinsic.b_dtype, intrinsic.c_dtype)
        and i.k == intrinsic.k
        and i.a_storage_dtype == intrinsic.a_storage_dtype
        and i.pack_b == intrinsic.pack_b
        and (not i.pack_b or i.packed_tile == intrinsic.packed_tile)
    ]


@dataclass(frozen=True)
class IntrinsicMatch:
    """How a stage maps onto an intrinsic.

    ``a``/``b`` are the stage's operands in the intrinsic's A/B roles (swapped when the stage
    writes ``W * X``); ``n_axis``/``k_axis`` (and ``m_axis`` when ``intrinsic.m > 1``) are
    the axes tiled by the intrinsic; every other axis is iterated outside the intrinsic.
    """

    stage: Stage
    intrinsic: Intrinsic
    a: Access
    b: Access
    m_axis: str | None
    n_axis: str
    k_axis: str


def _compound_axes(*accesses: Access) -> set[str]:
    """Axes that occur in some index that is not a plain axis (``h*s + rh*d``)."""
    out: set[str] = set()
    for acc in accesses:
        for plain, idx in zip(acc.axes, acc.index or (None,) * len(acc.axes)):
            if plain is None and idx is not None:
                out.update(idx.axes)
    return out


def _role_axes(stage: Stage, a: Access, b: Access) -> dict[str, list[str]]:
    c_axes, a_axes, b_axes = set(stage.write.axes), set(a.axes), set(b.axes)
    compound = _compound_axes(stage.write, a, b)
    roles: dict[str, list[str]] = {"m": [], "n": [], "k": [], "batch": []}
    for ax in stage.axes:
        name = ax.name
        if name in compound:
            continue  # iterated outside the intrinsic (e.g. oh, rh of a convolution)
        if ax.kind == "R":
            if name in a_axes and name in b_axes:
                roles["k"].append(name)
        elif name in c_axes and name in a_axes and name in b_axes:
            roles["batch"].append(name)
        elif name in c_axes and name in a_axes:
            roles["m"].append(name)
        elif name in c_axes and name in b_axes:
            roles["n"].append(name)
    return roles


def _affine(acc: Access) -> bool:
    """Every index of ``acc`` is a plain axis or affine in the axes (``h*s + rh*d - p``)."""
    if acc.is_plain:
        return True
    return bool(acc.index) and all(idx is not None for idx in acc.index)


def structural_match(stage: Stage) -> tuple[Access, Access, dict[str, list[str]]] | None:
    """The stage's MAC operands and axis roles, ignoring dtypes and extents; None if no MAC.

    Direct iterator mapping (Heron §4 Rule-S1 without im2col): a MAC qualifies when its output
    access is plain, every operand index is affine in the stage axes, and at least one axis has
    role ``n`` and one role ``k``. An axis gets a role only if it indexes its buffers *plainly*
    and occurs in no compound index: the intrinsic's own axes are then contiguous tiles of its
    operands, while axes in compound indices (a convolution's ``h*s + rh*d``) are iterated
    outside the intrinsic by the multi-level tiling.
    """
    mac = stage.mac
    if mac is None or not (mac.out.is_plain and _affine(mac.a) and _affine(mac.b)):
        return None
    roles = _role_axes(stage, mac.a, mac.b)
    if not roles["n"] or not roles["k"]:
        # maybe the operands are the other way round (W * X): swap and retry
        roles = _role_axes(stage, mac.b, mac.a)
        if not roles["n"] or not roles["k"]:
            return None
        return mac.b, mac.a, roles
    return mac.a, mac.b, roles


def match_intrinsic(stage: Stage, intrinsic: Intrinsic) -> IntrinsicMatch | None:
    """Map ``stage`` onto ``intrinsic``, or return None when its structure or dtypes differ.

    Operand dtypes must equal the intrinsic's (A and B may appear in either order in the
    product). Extents are *not* checked here: see :func:`shape_problems`.
    """
    found = structural_match(stage)
    if found is None:
        return None
    a, b, roles = found
    if (a.dtype, b.dtype) != (intrinsic.a_dtype, intrinsic.b_dtype):
        if (b.dtype, a.dtype) == (intrinsic.a_dtype, intrinsic.b_dtype):
            swapped = _role_axes(stage, b, a)
            if swapped["n"] and swapped["k"]:
                a, b, roles = b, a, swapped
            else:
                return None
        else:
            return None
    if stage.write.dtype != intrinsic.c_dtype:
        return None
    if intrinsic.m > 1 and not roles["m"]:
        return None
    # per role, an axis whose extent the intrinsic's tile divides (no padding) when one has,
    # and among those the innermost: the one indexing the latest buffer dimension of B (for n,
    # k) or A (for m), which keeps the intrinsic's operand tiles as contiguous as possible (a
    # sub-pixel transposed convolution's weight W[co, kh, kw, ci] has n candidates co, kh, kw:
    # the innermost, kw of extent 1, would be padded to 16)
    n_axis = _innermost(roles["n"], b, stage, intrinsic.n)
    k_axis = _innermost(roles["k"], b, stage, intrinsic.k)
    m_axis = _innermost(roles["m"], a, stage, intrinsic.m) if intrinsic.m > 1 else None
    return IntrinsicMatch(stage, intrinsic, a, b, m_axis, n_axis, k_axis)


def _innermost(candidates: list[str], access: Access, stage: Stage, tile: int) -> str:
    def key(ax: str) -> tuple[bool, int]:
        divides = stage.axis(ax).extent % tile == 0
        return divides, access.axes.index(ax) if ax in access.axes else -1

    return max(candidates, key=key)


def shape_problems(match: IntrinsicMatch) -> list[str]:
    """Why the stage's extents do not fit the intrinsic (empty when they do)."""
    problems = []
    intrin = match.intrinsic
    for axis, size, role in ((match.n_axis, intrin.n, "n"), (match.k_axis, intrin.k, "k")) + (
        ((match.m_axis, intrin.m, "m"),) if match.m_axis else ()
    ):
        extent = match.stage.axis(axis).extent
        if extent % size:
            problems.append(
                f"axis {axis} (intrinsic {role}) has extent {extent}, not a multiple of {size}"
            )
    return problems
