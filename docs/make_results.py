"""Rebuild the results tables in README.md and docs/*.md from the CSVs in benchmarks/results/.

A table in a Markdown file is the text between two markers::

    <!-- BEGIN TABLE suite-default -->
    ... generated: the table, then one line naming its CSV, machine, date and command ...
    <!-- END TABLE suite-default -->

Everything between the markers belongs to this script; everything outside them is prose. So a
number in a table cannot drift from its CSV: change the CSV, run the script, and the docs follow.

    .venv/bin/python docs/make_results.py            # rewrite the tables in place
    .venv/bin/python docs/make_results.py --check    # exit 1 (and print a diff) if any would change
    .venv/bin/python docs/make_results.py --list     # the registered tables and the files they read

**Registering a new CSV** is one entry in :data:`TABLES`: a name (the one in the markers), the
file glob(s) under ``benchmarks/results/``, the columns (a header and a format string over the
CSV's columns, or a function of the row), and the command that reproduces it. Put the markers
where the table should appear. A glob that matches no file renders a "not measured yet" line, so
an entry may wait for its CSV; a column the CSV lacks is an error that names the columns it has.

Format strings are Python's, over one CSV row, with three extras: an empty cell renders as "—",
a negative number gets a true minus sign, and the conversions ``!k`` (× 1000: s → ms),
``!m`` (÷ 1000: GFLOP/s → TFLOP/s) and ``!p`` (× 100: fraction → %) scale a number first.
"""

from __future__ import annotations

import argparse
import csv
import difflib
import itertools
import json
import math
import os
import re
import statistics
import string
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results"

Row = dict[str, Any]
Cell = str | Callable[[Row], Any]

MARKERS = re.compile(
    r"<!-- BEGIN TABLE (?P<name>[\w.-]+) -->\n(?P<body>.*?)<!-- END TABLE (?P<end>[\w.-]+) -->",
    re.S,
)
MINUS = "\u2212"

# CPU signatures the CSVs record, and what those machines are (from the notes of their runs)
KNOWN_CPUS = {
    "family 25 model 1 stepping 1": "family 25 model 1: Zen 3, AVX2, no AVX-512",
    "family 23 model 49 stepping 0": "family 23 model 49: Zen 2, AVX2, no AVX-512",
    "family 23 model 1 stepping 2": "family 23 model 1: Zen 1, AVX2 (128-bit units), no AVX-512",
    "family 25 model 17 stepping 1": "family 25 model 17: Zen 4, AVX-512 VNNI",
    "family 26 model 2 stepping 1": "family 26 model 2: Zen 5, AVX-512 VNNI, 512-bit datapaths",
    "family 6 model 167 stepping 1": "family 6 model 167 under KVM: AVX-512 VNNI, AMX",
    "family 6 model 207 stepping 2": "family 6 model 207: Emerald Rapids, KVM",
}


class TableError(Exception):
    """A table cannot be rendered (a missing column, an unknown or unclosed marker)."""


class _Empty(Exception):
    """A cell reads an empty CSV value: it renders as "—"."""


class _Blank(Exception):
    """A summary row has no value for this column: the cell stays blank."""


# ------------------------------------------------------------------------------------------------
# reading and formatting


def _parse(value: str | None) -> Any:
    if value is None or value == "":
        return None
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


def read_csv(path: Path) -> list[Row]:
    """The rows of a CSV, numbers parsed, with ``_file`` (its name) and ``_comment`` (the text of
    its ``#`` lines, which some CSVs use to name their machine and date)."""
    lines = path.read_text("utf-8").splitlines()
    comment = " ".join(line.lstrip("# ") for line in lines if line.startswith("#")) or None
    return [
        {k: _parse(v) for k, v in row.items()} | {"_file": path.name, "_comment": comment}
        for row in csv.DictReader(line for line in lines if not line.startswith("#"))
    ]


class _Formatter(string.Formatter):
    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if key in kwargs:
            return kwargs[key]
        if kwargs.get("_summary"):
            raise _Blank
        if kwargs.get("_sparse"):  # a pivoted row: an entry not measured in this file
            raise _Empty
        have = ", ".join(k for k in kwargs if not k.startswith("_"))
        raise TableError(f"no column {key!r} in {kwargs.get('_file')} (it has: {have})")

    def convert_field(self, value: Any, conversion: str | None) -> Any:
        scale = {"k": 1e3, "m": 1e-3, "p": 1e2}.get(conversion or "")
        if scale is None:
            return super().convert_field(value, conversion)
        return None if value is None else value * scale

    def format_field(self, value: Any, format_spec: str) -> str:
        if value is None:
            raise _Empty
        text = format(value, format_spec)
        return text.replace("-", MINUS) if isinstance(value, int | float) else text


FMT = _Formatter()


def fmt(template: str, row: Row) -> str:
    return FMT.vformat(template, (), row)


def ci(key: str, spec: str = ".1f", conv: str = "", signed: bool = False) -> Callable[[Row], str]:
    """A cell "mean [lo, hi]" from a pivoted summary entry ``row[key]`` (mean, ci_lo, ci_hi)."""
    sign = "+" if signed else ""
    c = f"!{conv}" if conv else ""
    template = f"{{mean{c}:{sign}{spec}}} [{{ci_lo{c}:{sign}{spec}}}, {{ci_hi{c}:{sign}{spec}}}]"

    def cell(row: Row) -> str:
        return fmt(template, FMT.get_value(key, (), row))

    return cell


def tflops_diff(key: str) -> Callable[[Row], str]:
    """A paired difference of GFLOP/s means, shown in TFLOP/s with its sign and CI."""
    return ci(key, ".2f", "m", signed=True)


# ------------------------------------------------------------------------------------------------
# the registry


@dataclass(frozen=True)
class Col:
    header: str
    value: Cell


@dataclass(frozen=True)
class Table:
    """One generated table.

    Attributes:
        name: the name in its markers.
        files: globs under ``benchmarks/results/``, in the order their rows appear.
        columns: the table's columns.
        command: the command that reproduces the CSV(s).
        where: keeps a CSV row when true (applied before ``rows``).
        rows: turns one file's rows into the table's rows (pivots, summaries); default: as read.
        summary: rows appended after all files' rows (a geometric mean ...), computed from them.
        machine: format strings naming the machine of a CSV row; the first that applies is used.
        date: format strings of a row's date; the first that applies is used (none: the
            machine's text already has it).
        before: a committed CSV the rows are joined with case by case
            (:func:`joined_with_before`, in place of ``rows``); linked beside the sources.
    """

    name: str
    files: tuple[str, ...]
    columns: tuple[Col, ...]
    command: str
    where: Callable[[Row], bool] | None = None
    rows: Callable[[list[Row]], list[Row]] | None = None
    summary: Callable[[list[Row]], list[Row]] | None = None
    machine: tuple[str, ...] = ("{cpu_model} ({cpu_signature})", "{cpu_model}", "{cpu}")
    date: tuple[str, ...] = ("{date:.10}", "{measured:.10}")
    before: str | None = None

    def paths(self) -> list[Path]:
        out: list[Path] = []
        for pattern in self.files:
            out += [p for p in sorted(RESULTS.glob(pattern)) if p not in out]
        return out


def _first(templates: Iterable[str], row: Row) -> str | None:
    for template in templates:
        try:
            return fmt(template, row)
        except (TableError, _Empty):
            continue
    return None


def _distinct(values: Iterable[str | None]) -> list[str]:
    return list(dict.fromkeys(v for v in values if v))


def _machine(text: str) -> str:
    for signature, what in KNOWN_CPUS.items():
        text = text.replace(signature, what)
    return text


def _cell(col: Col, row: Row) -> str:
    try:
        value = col.value(row) if callable(col.value) else fmt(col.value, row)
    except _Empty:
        return "" if row.get("_summary") else "—"
    except _Blank:
        return ""
    if value is None:
        return "—"
    value = str(value)
    return f"**{value}**" if row.get("_summary") and value else value


def render(table: Table, doc: Path) -> str:
    """The Markdown between ``table``'s markers in ``doc`` (links relative to ``doc``)."""
    paths = table.paths()
    if not paths:
        globs = ", ".join(f"`{g}`" for g in table.files)
        return f"_Not measured yet: no file in `benchmarks/results/` matches {globs}._\n"
    rows: list[Row] = []
    machines: list[str | None] = []
    dates: list[str | None] = []
    for path in paths:
        raw = [r for r in read_csv(path) if table.where is None or table.where(r)]
        machines += [_first(table.machine, r) for r in raw]
        dates += [_first(table.date, r) for r in raw]
        if table.before:
            raw = joined_with_before(table.before)(raw)
        rows += table.rows(raw) if table.rows else raw
    if table.summary:
        rows += [r | {"_summary": True} for r in table.summary(rows)]
    try:
        cells = [[_cell(c, row) for c in table.columns] for row in rows]
    except TableError as exc:
        raise TableError(f"table {table.name}: {exc}") from None
    for i, col in enumerate(table.columns):
        values = [c[i] for c, r in zip(cells, rows) if not r.get("_summary")]
        if values and all(v in ("", "—") for v in values):
            raise TableError(f"table {table.name}: column {col.header!r} is empty in every row")
    lines = [
        "| " + " | ".join(c.header for c in table.columns) + " |",
        "|" + "---|" * len(table.columns),
        *("| " + " | ".join(c) + " |" for c in cells),
    ]

    def link(p: Path) -> str:
        return f"[`{p.relative_to(RESULTS)}`]({Path(os.path.relpath(p, doc.parent)).as_posix()})"

    links = ", ".join(link(p) for p in paths)
    if table.before:
        links += f", joined with {link(RESULTS / table.before)}"
    where = "; ".join(_machine(m) for m in _distinct(machines)) or "machine not recorded"
    when = [", ".join(_distinct(dates)) or "date not recorded"] if table.date else []
    source = " · ".join([f"Source: {links}", where, *when, f"reproduce: `{table.command}`"])
    lines += ["", source]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# row transforms and summaries shared by several tables


def pivot(by: str, keep: tuple[str, ...] = ()) -> Callable[[list[Row]], list[Row]]:
    """One row per distinct ``keep`` values, with ``row[<value of by>]`` = that CSV row."""

    def rows(raw: list[Row]) -> list[Row]:
        out: dict[tuple, Row] = {}
        for r in raw:
            group = tuple(r[k] for k in keep)
            first = {k: r[k] for k in keep} | {"_file": r["_file"], "_sparse": True}
            out.setdefault(group, first)[r[by]] = r
        return list(out.values())

    return rows


def geomean(label_col: str, label: str, cols: tuple[str, ...], where=None):
    def summary(rows: list[Row]) -> list[Row]:
        picked = [r for r in rows if where is None or where(r)]
        out: Row = {label_col: label}
        for c in cols:
            vals = [r[c] for r in picked if isinstance(r.get(c), int | float)]
            out[c] = math.exp(statistics.fmean(math.log(v) for v in vals)) if vals else None
        return [out]

    return summary


def geomean_row_bold(raw: list[Row]) -> list[Row]:
    """A CSV whose last row is its own geometric mean: show that row as a summary."""
    return [r | {"_summary": True} if r.get("case") == "geomean" else r for r in raw]


def both(*summaries):
    return lambda rows: [r for s in summaries for r in s(rows)]


def _gm(values: Iterable[float]) -> float:
    vals = list(values)
    return math.exp(statistics.fmean(math.log(v) for v in vals))


def _by_case(
    raw: list[Row], keep: Callable[[Row], Any] = lambda r: True
) -> Iterator[tuple[Row, list[Row]]]:
    """``(head, rows)`` per case in first-seen order: the case's kept rows, and the fields
    that name it and its machine (from its first row)."""
    for case in dict.fromkeys(r["case"] for r in raw):
        rs = [r for r in raw if r["case"] == case and keep(r)]
        names = ("_file", "case", "shape_run", "cpu_model", "cpu_signature", "date")
        yield {k: rs[0][k] for k in names}, rs


def prior_by_case(raw: list[Row]) -> list[Row]:
    """prior_effect-*.csv: one row per case over its seeds (geomeans of the on/off ratios, the
    medians of the final kernels, how many tunes were at 95 % of their best after 8 trials)."""
    out = []
    for head, rs in _by_case(raw):
        out.append(
            head
            | {
                "seeds": len(rs),
                "on_final_ms": _median(rs, "on_final_ms"),
                "off_final_ms": _median(rs, "off_final_ms"),
                "speedup": _gm(r["speedup"] for r in rs),
                "first_round_speedup": _gm(r["first_round_speedup"] for r in rs),
                "on_at_8": sum(r["on_trials_to_95"] <= 8 for r in rs),
                "off_at_8": sum(r["off_trials_to_95"] <= 8 for r in rs),
                "better": sum(r["speedup"] > 1 for r in rs),
            }
        )
    every = {"final": [r["speedup"] for r in raw], "first": [r["first_round_speedup"] for r in raw]}
    out.append(
        {
            "_summary": True,
            "case": f"geomean over {len(raw)} tunes per arm",
            "speedup": _gm(every["final"]),
            "first_round_speedup": _gm(every["first"]),
            "on_at_8": sum(r["on_trials_to_95"] <= 8 for r in raw),
            "off_at_8": sum(r["off_trials_to_95"] <= 8 for r in raw),
            "better": sum(s > 1 for s in every["final"]),
            "seeds": len(raw),
        }
    )
    return out


PRIOR_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("final ms, prior on / off (median)", "{on_final_ms:.4f} / {off_final_ms:.4f}"),
    Col("final kernel, on vs off", "{speedup:.3f}"),
    Col("first round, on vs off", "{first_round_speedup:.3f}"),
    Col("tunes faster with the prior", "{better} of {seeds}"),
    Col("at 95 % of its best after 8 trials, on / off", "{on_at_8} / {off_at_8} of {seeds}"),
)

#: prior_effect.py --baseline <the old prior>: the "off" arm ranks by the old prior
PRIOR_REFIT_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("final ms, new / old prior (median)", "{on_final_ms:.4f} / {off_final_ms:.4f}"),
    Col("final kernel, new vs old", "{speedup:.3f}"),
    Col("first round, new vs old", "{first_round_speedup:.3f}"),
    Col("tunes faster with the new prior", "{better} of {seeds}"),
    Col("at 95 % of its best after 8 trials, new / old", "{on_at_8} / {off_at_8} of {seeds}"),
)

#: prior_effect.py --model-alone: both arms rank their first round by the prior (the same
#: proposals); the "on" arm's later rounds by XGBoost with the prior as its base margin, the
#: "off" arm's by XGBoost alone
PRIOR_MARGIN_TUNE_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("final ms, margin / model alone (median)", "{on_final_ms:.4f} / {off_final_ms:.4f}"),
    Col("final kernel, margin vs model alone", "{speedup:.3f}"),
    Col("tunes faster with the margin", "{better} of {seeds}"),
)

#: prior_margin.py's budgets, one column each
MARGIN_BUDGETS = (16, 24, 32, 48)


def margin_replay_rows(raw: list[Row]) -> list[Row]:
    """prior_margin-*.csv (one row per workload, arm and budget): one row per workload and arm,
    the best so far over the best recorded at each budget in ``b<trials>``; the ``all`` rows
    (geomeans over the workloads) last, as summaries."""
    out: dict[tuple[str, str], Row] = {}
    for r in raw:
        every = r["workload"] == "all"
        row = out.setdefault(
            (r["workload"], r["arm"]),
            {k: v for k, v in r.items() if k not in ("trials", "best_over_recorded_best")}
            | {"_summary": every},
        )
        row[f"b{r['trials']}"] = r["best_over_recorded_best"]
    rows = list(out.values())
    n = len({r["workload"] for r in rows if not r["_summary"]})
    for r in rows:
        if r["_summary"]:
            r["workload"] = f"geomean over {n} workloads"
    return [r for r in rows if not r["_summary"]] + [r for r in rows if r["_summary"]]


PRIOR_MARGIN_REPLAY_COLUMNS = (
    Col("case", "{workload}"),
    Col("later rounds ranked by", "{arm}"),
    *(Col(f"best / best recorded, {b} trials", f"{{b{b}:.3f}}") for b in MARGIN_BUDGETS),
)

#: prior_margin.py --prior: arms that differ by their prior (first round and base margin)
PRIOR_ZEN4_REPLAY_COLUMNS = (
    Col("case", "{workload}"),
    Col("arm", "{arm}"),
    *(Col(f"best / best recorded, {b} trials", f"{{b{b}:.3f}}") for b in MARGIN_BUDGETS),
)


def _option_arms(
    raw: list[Row], on: str = "option"
) -> tuple[list[Row], dict[str, list[Row]], list[Row]]:
    """target_options-*.csv rows with the arm ``on`` (``"option"`` or ``"base"``, the plain
    target) renamed "on" and the other "off": (:func:`prior_by_case` of them, their rows by
    case, all of them renamed)."""
    off = "base" if on == "option" else "option"
    renamed = [
        {k.replace(f"{on}_", "on_").replace(f"{off}_", "off_"): v for k, v in r.items()}
        for r in raw
    ]
    cases = {head["case"]: rs for head, rs in _by_case(renamed)}
    return prior_by_case(renamed), cases, renamed


def options_by_case(raw: list[Row]) -> list[Row]:
    """target_options-*.csv: :func:`prior_by_case` with the option's arm as "on" and the plain
    target's as "off", plus how many of each arm's picks had fewer than ``FEW_ACCUMULATORS``
    accumulators."""
    out, cases, renamed = _option_arms(raw)
    for row in out:
        rs = cases.get(row["case"], renamed)  # the summary row: every tune
        row["on_few"] = sum(r["on_accumulators"] < FEW_ACCUMULATORS for r in rs)
        row["off_few"] = sum(r["off_accumulators"] < FEW_ACCUMULATORS for r in rs)
    return out


def guards_by_case(
    raw: list[Row], on: str = "option", column: str = "guards", value: str = "all"
) -> list[Row]:
    """target_options-*.csv of an ``-all-guards`` run: :func:`prior_by_case` with the arm
    ``on`` (the option's, by default) as "on", plus how many of its picks (``on_picked``) have
    ``*_<column>`` equal to ``value``: by default, guard the padding taps inside the register
    tile (``*_guards`` is ``all``)."""
    out, cases, renamed = _option_arms(raw, on)
    for row in out:
        rs = cases.get(row["case"], renamed)  # the summary row: every tune
        row["on_picked"] = sum(str(r.get(f"on_{column}", "")) == value for r in rs)
    return out


def variants_by_case(raw: list[Row], column: str = "guards", value: str = "all") -> list[Row]:
    """target_options-*.csv of a run whose option arm goes without a finish knob
    (``-all-guards=1``: ``outer`` guards only; ``-widen-a=root``: A's copy at the root only)
    and whose base arm settles it by variant trials: :func:`guards_by_case` with the arms the
    other way round, "on" the variant trials (the base) and "off" the option, each row's
    ratios inverted to on vs off, counting the base's picks with ``*_<column>`` = ``value``."""
    ratios = ("speedup", "first_round_speedup")
    inverted = [r | {k: 1 / r[k] if r[k] else r[k] for k in ratios} for r in raw]
    return guards_by_case(inverted, on="base", column=column, value=value)


def copies_by_case(raw: list[Row]) -> list[Row]:
    """:func:`variants_by_case` of a ``-widen-a=root`` run: picks with A's copy in the
    parallel loop (``*_widened_copy`` is ``task``)."""
    return variants_by_case(raw, column="widened_copy", value="task")


VARIANT_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("final ms, variant trials / outer only (median)", "{on_final_ms:.3f} / {off_final_ms:.3f}"),
    Col("final kernel, variant trials vs outer only", "{speedup:.3f}"),
    Col("tunes faster with variant trials", "{better} of {seeds}"),
    Col("picks with all guards", "{on_picked} of {seeds}"),
)

#: target_options.py --options=-widen-a=root: the copy's place settled by variant trials
#: against a copy always at the root
COPY_COLUMNS = (
    *VARIANT_COLUMNS[:2],
    Col("final ms, variant trials / root only (median)", "{on_final_ms:.3f} / {off_final_ms:.3f}"),
    Col("final kernel, variant trials vs root only", "{speedup:.3f}"),
    VARIANT_COLUMNS[4],
    Col("picks with the copy in the parallel loop", "{on_picked} of {seeds}"),
)

#: the latency-hiding count of ``vpdpbusd`` accumulators on an Intel core (5 cycles × 2 a cycle)
FEW_ACCUMULATORS = 10

OPTIONS_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("final ms, with / without (median)", "{on_final_ms:.4f} / {off_final_ms:.4f}"),
    Col("final kernel, with vs without", "{speedup:.3f}"),
    Col("first round, with vs without", "{first_round_speedup:.3f}"),
    Col("tunes faster with it", "{better} of {seeds}"),
    Col("picks with < 10 accumulators, with / without", "{on_few} / {off_few} of {seeds}"),
)

#: prior_effect.py --baseline <the prior without padding.skipped>: a target option's columns,
#: then how soon each arm's tune was at 95 % of its best
PRIOR_PADDING_COLUMNS = (
    *OPTIONS_COLUMNS[:6],
    Col("at 95 % of its best after 8 trials, with / without", "{on_at_8} / {off_at_8} of {seeds}"),
)

GUARDS_OPTION_COLUMNS = (
    *OPTIONS_COLUMNS[:5],
    Col("picks with all guards, with it", "{on_picked} of {seeds}"),
)

#: benchmarks/pmaddwd_loops.py: the AVX2 int8 micro-kernel's loop five ways, in L1
PMADDWD_LOOP_COLUMNS = (
    Col("register tile (rows × vectors)", "{tile}"),
    Col("loop", "{variant}"),
    Col("G op/s (one thread, median)", "{gops:.1f}"),
    Col("% of the vpmaddwd peak", "{pct_peak:.0f}"),
    Col("exact", "{exact}"),
)

REGISTER_TILE_COLUMNS = (
    Col("case", "{case}"),
    Col("threads", "{threads}"),
    Col("register tile (rows × vectors)", "{tile}"),
    Col("accumulators", "{accumulators}"),
    Col("ms (median)", "{ms:.3f}"),
    Col("of the best tile", "{vs_best:.2f}"),
    Col("vs PyTorch", "{vs_pytorch:.2f}"),
)


WIDEN_A_COLUMNS = (
    Col("code for", "{mcpu}"),
    Col("register tile (rows × vectors)", "{tile}"),
    Col("ms, A pre-widened (median)", "{int16_ms:.3f}"),
    Col("ms, A widened in the call", "{uint8_ms:.3f}"),
    Col("pre-widened speed-up", "{speedup:.2f}"),
    Col("G op/s, pre-widened", "{gops:.0f}"),
)


def widen_a_by_tile(raw: list[Row]) -> list[Row]:
    """register_tiles_vpmaddwd_widen_a-*.csv (each tile timed with A read from the kernel's
    int16 copy and with A widened in every call): one row per tile, both times and the ratio."""
    out = []
    for tile in dict.fromkeys(r["tile"] for r in raw):
        by = {r["a_operand"]: r for r in raw if r["tile"] == tile}
        wide, narrow = by["int16"], by["uint8"]
        out.append(
            wide
            | {
                "mcpu": str(wide["target"]).split("-mcpu=")[1].split()[0],
                "int16_ms": wide["ms"],
                "uint8_ms": narrow["ms"],
                "speedup": narrow["ms"] / wide["ms"],
            }
        )
    return out


def joined_with_before(before_csv: str) -> Callable[[list[Row]], list[Row]]:
    """Rows of a fair table (the run after a change) joined by case with the committed CSV
    ``before_csv`` of the same machine and budget: each side's latency and its ratios to
    MetaSchedule and PyTorch, each measured within its own run, before and after."""

    def rows(raw: list[Row]) -> list[Row]:
        before = {r["case"]: r for r in read_csv(RESULTS / before_csv)}
        out = []
        for r in raw:
            b = before.get(r["case"])
            if b is None or not (r["heronlike_ms"] and b["heronlike_ms"]):
                continue
            out.append(
                r
                | {
                    f"{k}_{side}": row.get(k)
                    for side, row in (("before", b), ("after", r))
                    for k in ("heronlike_ms", "ms_ms", "pytorch_ms", "speedup_vs_ms")
                    + ("speedup_vs_pytorch", "heronlike_pct_peak")
                    + ("speedup_vs_pytorch_fastest_process", "peak_gops")
                    + ("heronlike_pct_peak_turns", "speedup_vs_ms_fastest_process")
                }
                | {"heronlike_gain": b["heronlike_ms"] / r["heronlike_ms"]}
            )
        return out

    return rows


def seeds_by_case(raw: list[Row]) -> list[Row]:
    """suite_seeds-*.csv (fair-table rows of the same cases at several seeds, both tuners given
    each seed): one row per case, the medians over the seeds and how many seeds heronlike won."""
    out = []
    for head, rs in _by_case(raw, lambda r: r["heronlike_ms"] and r["ms_ms"]):
        out.append(
            head
            | {
                "seeds": ", ".join(str(r["seed"]) for r in rs),
                "n": len(rs),
                "heronlike_ms": _median(rs, "heronlike_ms"),
                "ms_ms": _median(rs, "ms_ms"),
                "pytorch_ms": _median(rs, "pytorch_ms"),
                "vs_ms": _gm(r["speedup_vs_ms"] for r in rs),
                "vs_pytorch": _gm(r["speedup_vs_pytorch"] for r in rs),
                "won_ms": sum(r["speedup_vs_ms"] >= 1 for r in rs),
                "won_pytorch": sum(r["speedup_vs_pytorch"] >= 1 for r in rs),
            }
        )
    return out


SEEDS_COLUMNS = (
    Col("case", "{case}"),
    Col("seeds", "{seeds}"),
    Col("heronlike ms (median)", "{heronlike_ms:.4g}"),
    Col("MetaSchedule ms (median)", "{ms_ms:.4g}"),
    Col("PyTorch ms (median)", "{pytorch_ms:.4g}"),
    Col("vs MS (geomean)", "{vs_ms:.2f}"),
    Col("vs PyTorch (geomean)", "{vs_pytorch:.2f}"),
    Col("seeds won vs MS / PyTorch", "{won_ms} / {won_pytorch} of {n}"),
)


PADDING_SKIP_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("padding share of the input", lambda r: f"{100 * r['zero_share']:.0f} %"),
    Col("all a knob", lambda r: "yes" if r["knob"] == "True" else "no"),
    Col("tune picked", "{picked}"),
    Col("no guards ms", "{none_ms:.4f}"),
    Col("outer guards, speed vs none", "{outer_speedup:.3f}"),
    Col("all guards, speed vs none", "{all_speedup:.3f}"),
)

PADDING_SKIP_VERSION_COLUMNS = (
    *PADDING_SKIP_COLUMNS,
    Col("all guards in one version, speed vs none", "{all_one_version_speedup:.3f}"),
)

#: ... with the speed of all guards over outer ones and the seed (2026-12-06)
PADDING_SKIP_SEED_COLUMNS = (
    PADDING_SKIP_VERSION_COLUMNS[0],
    Col("seed", "{seed}"),
    *PADDING_SKIP_VERSION_COLUMNS[2:],
    Col("all vs outer", lambda r: f"{r['outer_ms'] / r['all_ms']:.3f}"),
)

# Runs before 2026-12-01 built their outer and all programs by annotating over the tune's own
# annotation, which TVM 0.27 keeps: both columns timed the tune's pick (postproc.with_guard_place)
PADDING_SKIP_PICK_COLUMNS = (
    *PADDING_SKIP_COLUMNS[:6],
    Col("the tune's pick, speed vs none", "{outer_speedup:.3f}"),
    Col("the same, timed again", "{all_speedup:.3f}"),
)

LOOP_ORDER_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("threads", "{threads}"),
    Col("random points", "{points}"),
    Col("micro-kernel vs Ansor order, geomean", "{geomean_speedup:.2f}"),
    Col("lowest / highest", "{min_speedup:.2f} / {max_speedup:.2f}"),
    Col("best point ms, Ansor / micro-kernel", "{best_ansor_ms:.3f} / {best_micro_ms:.3f}"),
    Col("within 2x of the best, Ansor / micro-kernel", "{within2x_ansor} / {within2x_micro}"),
)


#: benchmarks/gemv_stream.py: a GEMV's split factors by DL Boost (micro-kernel order, the faster
#: write-back position) and with the streaming options on, the order knob at 0 and at 1
GEMV_STREAM_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("points", "{points}"),
    Col("streamed vs DL Boost, geomean", "{geomean_speedup:.2f}"),
    Col("lowest / highest", "{min_speedup:.2f} / {max_speedup:.2f}"),
    Col("micro-kernel, no write-back, vs DL Boost", "{geomean_micro_speedup:.2f}"),
    Col(
        "best µs DL Boost / micro-kernel / streamed",
        "{best_dlboost_us:.3f} / {best_micro_us:.3f} / {best_stream_us:.3f}",
    ),
    Col(
        "within 10 % of the best, DL Boost / micro-kernel / streamed",
        "{within10pct_dlboost} / {within10pct_micro} / {within10pct_stream}",
    ),
)
#: ... in tunes: DL Boost against the streaming options, each tune's best re-timed
GEMV_STREAM_TUNED_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("seed", "{seed}"),
    Col("DL Boost µs", "{dlboost_us:.3f}"),
    Col("streaming options µs", "{streaming_us:.3f}"),
    Col("streaming vs DL Boost", "{speedup:.2f}"),
    Col("its best streamed", lambda r: {1: "yes", 0: "no"}.get(r.get("streaming_picked"), "—")),
    Col(
        "tuning-time best µs, DL Boost / streaming",
        "{dlboost_tuning_us:.3f} / {streaming_tuning_us:.3f}",
    ),
)
#: ... one point with the output at offsets from the vector modulo 4 KiB
GEMV_STREAM_ALIAS_COLUMNS = (
    Col("case", "{case}"),
    Col("point", "{point}"),
    Col("y − x mod 4096, bytes", "{y_minus_x_mod_4k}"),
    Col("DL Boost µs", "{dlboost_us:.3f}"),
    Col("streamed µs", "{stream_us:.3f}"),
    Col("streamed vs DL Boost", "{speedup:.2f}"),
)

#: one tile parallel and serial, each timed in fresh processes (benchmarks/process_modes.py)
PROCESS_MODES_COLUMNS = (
    Col("case", "{case}"),
    Col("kernel", "{kernel}"),
    Col("process", "{process}"),
    Col("first 5 µs", "{first_us:.2f}"),
    Col(
        "steady µs (fastest–slowest)",
        "{steady_us:.2f} ({steady_low_us:.2f}–{steady_high_us:.2f})",
    ),
    Col("launch µs", "{launch_us:.2f}"),
)


def process_modes_summary(rows: list[Row]) -> list[Row]:
    """Per kernel: the median over its processes of their first-5 and steady medians, the
    fastest and the slowest steady median, and the median launch."""
    out = []
    for kernel in dict.fromkeys(r["kernel"] for r in rows):
        got = sorted(r["steady_us"] for r in rows if r["kernel"] == kernel)
        out.append(
            {"case": "all", "kernel": kernel, "process": f"{len(got)} processes",
             "first_us": statistics.median(r["first_us"] for r in rows if r["kernel"] == kernel),
             "steady_us": statistics.median(got), "steady_low_us": got[0],
             "steady_high_us": got[-1],
             "launch_us": statistics.median(r["launch_us"] for r in rows if r["kernel"] == kernel)}
        )  # fmt: skip
    return out


#: tiles of one case timed in the same turns, near and far (benchmarks/core_distance.py)
CORE_DISTANCE_COLUMNS = (
    Col("case", "{case}"),
    Col("tile", "{tile}"),
    Col("changed from the tuned tile", lambda r: r["changes"] or "—"),
    Col("parallel tasks", "{parallel_tasks}"),
    Col("near µs", "{near_us:.2f}"),
    Col("far µs", "{far_us:.2f}"),
    Col("far / near", "{far_over_near:.2f}"),
    Col("turns near / far", "{near_turns} / {far_turns}"),
    Col("round trip ns, near / far", "{round_trip_near_ns:.0f} / {round_trip_far_ns:.0f}"),
)

#: what each tile of core_distance_orders-*.csv is (C2D2's axes: v_i0 rows, v_i1 columns,
#: v_i2 channel blocks; the cache tile's loops listed outermost first)
CORE_DISTANCE_ORDERS = {
    "rows_2": "28 rows per thread; channels, columns, rows (the rows walked 16 times)",
    "rows_2_rows_outer": "28 rows per thread; rows, columns, channels (walked once)",
    "rows_2_cols_inner": "28 rows per thread; channels, rows, columns (walked twice)",
    "cols_14": "14 blocks of 4 columns; rows, channels, columns (2 a walk)",
    "rows_8_co_2": "8 blocks of 7 rows × 2 of channels; columns, rows, channels",
    "rows_14": "14 blocks of 4 rows; rows, columns, channels (walked once)",
    "rows_14_cols_2": "14 blocks of 4 rows × 2 of columns; channels, rows, columns",
}

CORE_DISTANCE_ORDER_COLUMNS = (
    Col("case", "{case}"),
    Col("tile", "{tile}"),
    Col(
        "parallel split; cache-tile order, outermost first",
        lambda r: CORE_DISTANCE_ORDERS[r["tile"]],
    ),
    *CORE_DISTANCE_COLUMNS[3:8],
)


def split_axis_by_case(raw: list[Row]) -> list[Row]:
    """target_options-*.csv of a ``-split-axis-ops=0`` run, from the rule's side: per case,
    the default space's picks ("rule", the ``base`` arm) against the whole space's ("whole",
    the option's arm): median final µs of each, geomeans of whole / rule over all turns, near
    turns and far turns (tunes with turns of that state), and the tunes the rule made faster;
    then the same over every tune."""

    def summary(rs: list[Row]) -> Row:
        ratio = {
            state: [r[f"option_{key}_ms"] / r[f"base_{key}_ms"] for r in rs
                    if r.get(f"option_{key}_ms") and r.get(f"base_{key}_ms")]
            for state, key in (("all", "final"), ("near", "near"), ("far", "far"))
        }  # fmt: skip
        return {
            "tunes": len(rs),
            "far_share": statistics.fmean(r["far_turn_share"] for r in rs),
            "rule_us": 1e3 * _median(rs, "base_final_ms"),
            "whole_us": 1e3 * _median(rs, "option_final_ms"),
            **{f"{k}_ratio": _gm(v) if v else None for k, v in ratio.items()},
            **{f"{k}_tunes": len(v) for k, v in ratio.items()},
            "better": sum(v > 1 for v in ratio["all"]),
        }

    out = [head | summary(rs) for head, rs in _by_case(raw)]
    out.append({"_summary": True, "case": f"all {len(raw)} tunes"} | summary(raw))
    return out


def _ratio_over(state: str) -> Callable[[Row], str]:
    def cell(r: Row) -> str:
        if r.get(f"{state}_ratio") is None:
            raise _Empty
        return f"{r[f'{state}_ratio']:.3f} ({r[f'{state}_tunes']})"

    return cell


SPLIT_AXIS_COLUMNS = (
    Col("case", "{case}"),
    Col("share of far turns", lambda r: _share(r["far_share"])),
    Col("final µs, rule / whole space (median)", "{rule_us:.1f} / {whole_us:.1f}"),
    Col("rule's speed, all turns (tunes)", _ratio_over("all")),
    Col("in near turns", _ratio_over("near")),
    Col("in far turns", _ratio_over("far")),
    Col("tunes faster with the rule", "{better} of {tunes}"),
)

#: suite rows with every harness sample labelled near or far (benchmarks/suite.py)
SUITE_CORE_STATE_COLUMNS = (
    Col("case", "{case}"),
    Col("round trip ns (lowest–highest)", "{round_trip_ns_low:.0f}–{round_trip_ns_high:.0f}"),
    Col("far turns", lambda r: _share(r.get("far_turn_share"))),
    Col("heronlike near / far µs", lambda r: _near_far(r, "heronlike")),
    Col("MetaSchedule near / far µs", lambda r: _near_far(r, "ms")),
    Col("heronlike, equal wall time, near / far µs", lambda r: _near_far(r, "heronlike_eq_wall")),
    Col("vs MetaSchedule, near / far", lambda r: _near_far(r, "speedup_vs_ms", "", 1, 2)),
    Col("heronlike tuning-time best µs", lambda r: f"{1e3 * r['heronlike_tuning_best_ms']:.1f}"),
)


def _share(v: float | str | None) -> str:
    """A share (0-1) as a whole percentage (an empty cell: :class:`_Empty`)."""
    if v in (None, ""):
        raise _Empty
    return f"{100 * float(v):.0f} %"


def _near_far(r: Row, stem: str, ms: str = "_ms", scale: float = 1e3, digits: int = 1) -> str:
    """``<near> / <far>`` of a suite row's ``<stem>_near<ms>`` and ``<stem>_far<ms>`` (times
    ``scale``; "—" for a state without samples; :class:`_Empty` when both are)."""
    vals = [r.get(f"{stem}_{state}{ms}") for state in ("near", "far")]
    if all(v in (None, "") for v in vals):
        raise _Empty
    return " / ".join("—" if v in (None, "") else f"{scale * v:.{digits}f}" for v in vals)


FUSED_PLACEMENT_COLUMNS = (
    Col("case", "{case}"),
    Col("schedule (rank in the tune)", "{schedule_rank}"),
    Col("placement separate ms", "{separate_ms:.4f}"),
    Col("fused at S0 ms", "{fused0_ms:.4f}"),
    Col("fused at S1 ms", "{fused1_ms:.4f}"),
    Col("speed, best fused vs separate", "{speedup:.3f}"),
)


#: store_spread-*.csv's part ``c`` variants as the table names them
STORE_SPREAD_MODEL = {
    "after": "after the reduction, in one burst",
    "before": "before the reduction, in one burst",
    "spread": "1.5 after each of the 32 steps",
    "chunks-4": "12 after every 8th step",
    "products-only": "none (the product alone: 1 KiB of output per tile)",
    "after, non-temporal": "after the reduction, in one burst of non-temporal stores",
    "spread, non-temporal": "1.5 non-temporal stores after each step",
    "after, clzero": "after the reduction, in one burst of `clzero`",
    "spread, clzero": "1.5 `clzero` after each step",
    "spread, to an L1 scratch": "1.5 after each step, to 2 KiB that stay in L1 (not the output)",
    "spread, prefetchw the next tile": "1.5 after each step, the next tile's lines prefetched",
}
STORE_SPREAD_MODEL_COLUMNS = (
    Col("where a tile's 48 zero vectors are stored", lambda r: STORE_SPREAD_MODEL[r["variant"]]),
    Col("µs per call", "{us:.1f}"),
    Col("speed vs after the reduction", "{speed:.3f}"),
    Col("G op/s", "{gops:.0f}"),
)

#: store_spread-*.csv's ``part`` values of part ``tvm`` as the table names them
STORE_SPREAD_PARTS = {
    "tvm vnni int8": "DL Boost, int8",
    "tvm general int8": "general, int8",
    "tvm llvm float32": "general (llvm), float32",
}
STORE_SPREAD_KERNEL_COLUMNS = (
    Col("rules, dtype", lambda r: STORE_SPREAD_PARTS.get(r["part"], r["part"])),
    Col("case", "{case}"),
    Col("finalist (trial)", "{trial}"),
    Col("zeros after the reduction µs", "{after_us:.1f}"),
    Col("zeros between the steps µs", "{between_us:.1f}"),
    Col("speed, between vs after", "{speed:.3f}"),
)


def store_spread_kernels(raw: list[Row]) -> list[Row]:
    """store_spread-*.csv, part ``tvm``: one row per configuration, case and finalist with both
    builds' times, then each configuration and case's geometric mean of the speed-ups."""
    rows: dict[tuple[str, str, str], Row] = {}
    for r in raw:
        row = rows.setdefault((r["part"], r["case"], r["trial"]), dict(r))
        if r["zeros"] == "between":
            row["between_us"], row["speed"] = r["us"], r["speed"]
        else:
            row["after_us"] = r["us"]
    out = []
    for (part, case), group in itertools.groupby(rows.values(), lambda r: (r["part"], r["case"])):
        group = list(group)
        gm = {"part": part, "case": case, "trial": "geomean", "_summary": True}
        out += [*group, gm | {"speed": _gm(r["speed"] for r in group)}]
    return out


#: the finalist counts measure_rounds.py simulates (its ``top<k>_vs_best`` columns, checked
#: against the CSV's header by :func:`rounds_by_case`, so the two cannot drift apart silently)
TOP_K = (1, 2, 4, 8)


def rounds_by_case(raw: list[Row]) -> list[Row]:
    """measure_rounds-*.csv: one row per case and runner over its tunes (every run and seed),
    then one per runner over every tune (trials timed slow, the median and largest trial error,
    how often the tune returned its truly fastest trial, and the simulated finishes of the
    rows that have them)."""

    in_csv = {int(m[1]) for r in raw for c in r if (m := re.fullmatch(r"top(\d+)_vs_best", c))}
    if in_csv and in_csv != set(TOP_K):
        raise ValueError(f"the CSV's top-k columns are {sorted(in_csv)}, the table's {TOP_K}")

    def agg(rs: list[Row]) -> Row:
        top = {k: [r[f"top{k}_vs_best"] for r in rs if r.get(f"top{k}_vs_best")] for k in TOP_K}
        return {
            "tunes": len(rs),
            "trials": sum(r["ok_trials"] for r in rs),
            "slow_trials": sum(r["slow_trials"] for r in rs),
            "trial_err_median": statistics.median(r["trial_err_median"] for r in rs),
            "trial_err_max": max(r["trial_err_max"] for r in rs),
            "picked_ms": statistics.median(r["picked_ms"] for r in rs),
            "picked_vs_best": _gm(r["picked_vs_best"] for r in rs),
            "fastest": sum(r["picked_vs_best"] <= 1.0 for r in rs),
            # the simulated finishes, where the CSV has them (the second run)
            **{f"top{k}": _gm(v) for k, v in top.items() if v},
            "top_tunes": len(top[1]),
        }

    runners = list(dict.fromkeys(r["runner"] for r in raw))
    out = [
        head | {"runner": who} | agg([r for r in rs if r["runner"] == who])
        for head, rs in _by_case(raw)
        for who in runners
    ]
    summary = []
    for who in runners:
        row = agg([r for r in raw if r["runner"] == who])
        del row["picked_ms"]  # a median over different cases says nothing
        summary.append({"_summary": True, "case": "all cases", "runner": who} | row)
    return out + summary


ROUNDS_COLUMNS = (
    Col("case", "{case}"),
    Col("runner", "{runner}"),
    Col("tunes", "{tunes}"),
    Col("trials timed ≥ 1.25× slow", "{slow_trials} of {trials}"),
    Col("trial error, median / max", "{trial_err_median:.1%} / {trial_err_max:.0%}"),
    Col("returned kernel ms (median)", "{picked_ms:.4f}"),
    Col("returned vs fastest trial (geomean)", "{picked_vs_best:.3f}"),
    Col("returned the fastest", "{fastest} of {tunes}"),
    Col(
        "fastest of the k timed fastest vs fastest trial, k = 1 / 2 / 4 / 8 (geomean; tunes)",
        "{top1:.3f} / {top2:.3f} / {top4:.3f} / {top8:.3f} ({top_tunes})",
    ),
)


SPACES = {  # file-name fragments of the search-efficiency CSVs -> the space's name
    "gemm1024x1024x1024": "GEMM 1024³",
    "bmm12x512x512x64": "BMM 12×512×512×64",
    "c2d1x56x56x64x64x1x1x1x0x1": "C2D 1×56×56×64→64, 1×1",
    "gemm512x512x512": "GEMM 512³",
}


def space_of(row: Row) -> str:
    name = row["_file"]
    for fragment, label in SPACES.items():
        if f"-{fragment}-" in name:
            return label
    return "GEMM 256³"  # the first surrogate, recorded before the files named their space


def _median(rows: list[Row], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def run_medians(raw: list[Row]) -> list[Row]:
    """search_efficiency_runs.csv: per explorer, medians over seeds per op, invalid shares."""
    notes = {"rand": "(RandSAT only)", "random": "(CRAND)"}
    invalid = {"ga": ("invalid_children", "children", "of children invalid, discarded"),
               "opevo": ("invalid_walks", "walks", "of walks invalid, walked again")}  # fmt: skip
    budget, longest = min(r["trials"] for r in raw), max(r["trials"] for r in raw)
    out = []
    for explorer in dict.fromkeys(r["explorer"] for r in raw):
        runs = [r for r in raw if r["explorer"] == explorer]
        ops = list(dict.fromkeys(r["op"] for r in runs))
        row: Row = {"_file": runs[0]["_file"], "explorer": explorer}
        label = [f"`{explorer}`", notes.get(explorer, "")]
        for op in ops:
            mine = [r for r in runs if r["op"] == op]
            at, final = _median(mine, "best_gops_at_trials"), _median(mine, "best_gops_final")
            longer = any(r["trials"] > budget for r in mine)
            row[op] = f"{at:.0f} / {final:.0f}" if longer else f"{at:.0f}"
            row[f"{op} remeasured"] = f"{_median(mine, 'remeasured_gops'):.0f}"
            row[f"{op} share"] = _median(mine, "explorer_share")
        if explorer in invalid:
            bad, total, what = invalid[explorer]
            shares = []
            for op in ops:
                stats = [json.loads(r["stats"]) for r in runs if r["op"] == op]
                shares.append(f"{sum(s[bad] for s in stats) / sum(s[total] for s in stats):.0%}")
            label.append(f"({' / '.join(shares)} {what})")
        if any(r["trials"] > budget for r in runs):
            label.append(f"@{budget} / @{longest}")
        row["label"] = " ".join(x for x in label if x)
        row["share"] = " / ".join(f"{row[f'{op} share']:.1%}" for op in ops)
        out.append(row)
    return out


def explorer_summary(raw: list[Row]) -> list[Row]:
    """A search-efficiency summary CSV: one row per explorer and op, tuning-time and re-measured
    mean best with 95% CIs (two budgets where the explorer ran longer)."""
    out: dict[tuple, Row] = {}
    for r in raw:
        m = re.fullmatch(r"(\w+)@(\d+)( remeasured)?", r["what"])
        if not m:
            continue
        row = out.setdefault((r["op"], m[1]), {"_file": r["_file"], "op": r["op"]})
        row["label"] = f"`{m[1]}`"
        if m[3]:
            row["remeasured"] = fmt("{mean:.0f} [{ci_lo:.0f}, {ci_hi:.0f}]", r)
        else:
            row.setdefault("budgets", []).append((int(m[2]), r))
    for row in out.values():
        budgets = sorted(row.pop("budgets"))
        last = budgets[-1][1]
        means = " / ".join(fmt("{mean:.0f}", r) for _, r in budgets)
        row["label"] += " " + " / ".join(f"@{n}" for n, _ in budgets)
        row["tuning"] = means + fmt(" [{ci_lo:.0f}, {ci_hi:.0f}]", last)
    return list(out.values())


def surrogate_row(raw: list[Row]) -> list[Row]:
    """A surrogate summary CSV as one row: CGA, CGA-1 at the budget, RAND at the largest one."""
    (row,) = pivot("what")(raw)
    budgets = sorted({int(k.split("@")[1]) for k in row if re.fullmatch(r"\w+@\d+", k)})
    small, large = budgets[0], budgets[-1]
    out = {
        "_file": row["_file"],
        "_sparse": True,
        "space": space_of(row),
        "seeds": raw[0]["seeds"],
        "budget": small,
        "rand budget": large,
    }
    for key, what in [("cga", f"cga@{small}"), ("cga1", f"cga1@{small}"),
                      ("rand", f"rand@{large}"), ("opevo", f"opevo@{small}"),
                      ("flextensor", f"flextensor@{small}"),
                      ("cga - cga1", f"cga@{small} - cga1@{small}"),
                      ("cga - rand", f"cga@{small} - rand@{large}")]:  # fmt: skip
        if what in row:
            out[key] = row[what]
    return [out]


def paired_row(raw: list[Row]) -> list[Row]:
    """A summary CSV of one space, or its ``…_hardware.csv`` (the bests re-measured on the GPU),
    as one row keyed by ``what`` with the trial budgets dropped (``cga@1000`` -> ``cga``)."""
    if "kind" in raw[0]:
        raw = [r for r in raw if r["kind"] == "summary"]
    (row,) = pivot("what")(raw)
    row = {re.sub(r"@\d+", "", k): v for k, v in row.items()}
    where = "H100" if row["_file"].endswith("_hardware.csv") else "surrogate"
    return [row | {"space": f"{space_of(row)}, {where}"}]


def _vs_faster_onnxruntime(row: Row) -> str:
    """heronlike int8's speed-up over the faster of ONNX Runtime's int8 and float32 runs (on a
    CPU without VNNI its int8 run can be the slower one)."""
    ort = min(row["onnxruntime_int8"]["latency_s"], row["onnxruntime_float32"]["latency_s"])
    return f"{ort / row['heronlike_int8']['latency_s']:.2f}"


def model_run(row: Row) -> str:
    m = re.match(r"models_(?:e2e|int8)-(\w+)-(?:\w+-)?t(\d+)-", row["_file"])
    name = {"resnet50": "ResNet-50", "bert": "BERT-base"}.get(m[1], m[1]) if m else row["_file"]
    return f"{name} @{m[2]}" if m else name


def sensitivity(raw: list[Row]) -> list[Row]:
    out = []
    for case in dict.fromkeys(r["case"] for r in raw):
        mine = [r for r in raw if r["case"] == case]
        low = min(mine, key=lambda r: r["kendall_tau"])
        out.append(
            {
                "_file": low["_file"],
                "case": case,
                "variants": len(mine),
                "median": statistics.median(r["kendall_tau"] for r in mine),
                "lowest": low["kendall_tau"],
                "lowest_variant": low["variant"],
                "alone": min(
                    (r for r in mine if re.search(r"\((low|high)\)$", r["variant"])),
                    key=lambda r: r["kendall_tau"],
                ),
                "best_kept": sum(r["best_kept"] == "True" for r in mine),
                "n_schedules": low["n_schedules"],
            }
        )
    return out


def estimate_total(raw: list[Row]) -> list[Row]:
    """model_estimate-*.csv: its TOTAL row, with the dtype and PyTorch call of its layers."""
    *layers, total = raw
    if not str(total["layer"]).startswith("TOTAL"):
        raise TableError(f"{total['_file']}: its last row is not the TOTAL row")
    first = layers[0]
    return [total | {k: first[k] for k in ("dtype", "torch_impl")} | {"_workloads": len(layers)}]


def kill_summary(raw: list[Row]) -> list[Row]:
    last = raw[-1]
    return [
        {
            "_file": last["_file"],
            "kills": len(raw),
            "at": ", ".join(str(r["committed"]) for r in raw),
            "lost_total": last["lost_total"],
            "in_flight": max(r["in_flight"] for r in raw),
            "mid_batch": sum(r["mid_batch"] == "True" for r in raw),
            "trials": last["trials"],
            "batch": last["batch"],
            "final_ok": last["final_ok"],
        }
    ]


# ------------------------------------------------------------------------------------------------
# the tables


def _engines(*cols: tuple[str, str]) -> tuple[Col, ...]:
    return tuple(Col(h, f"{{{e}[latency_s]!k:.1f}}") for h, e in cols)


ENGINES = _engines(
    ("heronlike ms", "heronlike"),
    ("MetaSchedule ms", "metaschedule"),
    ("ONNX Runtime ms", "onnxruntime"),
    ("PyTorch eager ms", "pytorch"),
    ("TVM untuned ms", "tvm_untuned"),
)
MODEL_COLUMNS = (
    Col("model @ trials", model_run),
    Col("trials heronlike / MS", "{heronlike[trials]} / {metaschedule[trials]}"),
    *ENGINES,
    Col("heronlike / ONNX Runtime speed", "{heronlike[speedup_vs_onnxruntime]:.2f}"),
)
MODELS_CMD = (
    "python benchmarks/models_e2e.py --model resnet50 --trials 1152  (--model bert --trials 320)"
)

MODELS_INT8_CMD = (
    "python benchmarks/models_int8.py --model bert --trials 480 --layers"
    "  (--quantize dynamic; --model resnet50 --trials 1000)"
)
MODELS_INT8_VNNI_CMD = (
    "python benchmarks/models_int8.py --model resnet50 --trials 1000  (--model bert --trials 600"
    " --layers; --model bert --quantize dynamic --trials 600)"
)


def int8_model_tables(name: str, runs: str, command: str) -> tuple[Table, Table]:
    """The int8 models' table ``name`` and its per-task table ``name-tasks``, from the
    ``models_int8-<runs>.csv`` files of one machine (``runs`` a glob of the stem after
    ``models_int8-``)."""
    models = Table(
        name,
        (f"models_int8-{runs}.csv",),
        (
            Col("model @ trials", model_run),
            Col("quantized", "{quantize}"),
            *_engines(
                ("heronlike int8 ms", "heronlike_int8"),
                ("ONNX Runtime int8 ms", "onnxruntime_int8"),
                ("heronlike fp32 ms", "heronlike_float32"),
                ("ONNX Runtime fp32 ms", "onnxruntime_float32"),
            ),
            Col("int8 vs ONNX Runtime int8", "{heronlike_int8[speedup_vs_onnxruntime_int8]:.2f}"),
            Col("int8 vs own fp32", "{heronlike_int8[speedup_vs_own_float32]:.2f}"),
            Col("int8 vs ONNX Runtime's faster run", _vs_faster_onnxruntime),
            Col(
                "layers int8 / float",
                "{heronlike_int8[integer_layers]} / {heronlike_int8[float_layers]}",
            ),
        ),  # fmt: skip
        command,
        rows=pivot("engine", ("model", "quantize")),
    )
    tasks = Table(
        f"{name}-tasks",
        (f"models_int8-{runs}-tasks.csv",),
        (
            Col("model @ trials", model_run),
            Col("task", lambda r: fmt("{task}", r).split(" ")[0][:48]),
            Col("shape", lambda r: " ".join(fmt("{task}", r).split(" ")[1:])[:40]),
            Col("× per run", "{weight}"),
            Col("trials", "{trials}"),
            Col("ms", "{best_latency_s!k:.3f}"),
            Col("GOP/s", "{gop_per_s:.0f}"),
            Col("% of peak", "{pct_of_peak:.0f} ({peak_kernel})"),
        ),
        command,
        where=lambda r: (
            r["precision"] == "int8" and isinstance(r.get("gop"), int | float) and r["gop"] >= 0.01
        ),
    )
    return models, tasks


SUITE_COLUMNS = (
    Col("case", "{case}"),
    Col("shape", "{params}"),
    Col("heronlike ms", "{heronlike_ms:.3f}"),
    Col("MetaSchedule ms", "{ms_ms:.3f}"),
    Col("MS weights", lambda r: re.sub(r"^packed.*", "VNNI-packed", fmt("{ms_weights}", r))),
    Col("PyTorch ms", "{pytorch_ms:.3f}"),
    Col("numpy fp32 ms", "{numpy_ms:.3f}"),
    Col("vs MS", "{speedup_vs_ms:.2f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
)  # fmt: skip
SUITE_GEOMEANS = both(
    geomean("case", "geomean, all rows", ("speedup_vs_ms", "speedup_vs_pytorch")),
    geomean(
        "case",
        "geomean, rows where MS had VNNI-packed weights",
        ("speedup_vs_ms", "speedup_vs_pytorch"),
        where=lambda r: str(r.get("ms_weights")).startswith("packed"),
    ),
)

FAIR_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("heronlike ms", "{heronlike_ms:.3f}"),
    Col("MetaSchedule ms", "{ms_ms:.3f}"),
    Col("PyTorch ms", "{pytorch_ms:.3f}"),
    Col("numpy ms", "{numpy_ms:.3f}"),
    Col("vs MS, equal trials", "{speedup_vs_ms:.2f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("search s heronlike / MS", "{heronlike_search_s:.0f} / {ms_search_s:.0f}"),
    Col("intrinsic in asm H / MS", "{intrinsic}: {heronlike_uses_intrinsic} / {ms_uses_intrinsic}"),
    Col("% of peak heronlike / MS", "{heronlike_pct_peak:.0f} / {ms_pct_peak:.0f}"),
    Col("trials to 95 % heronlike / MS", "{heronlike_trials_to_95} / {ms_trials_to_95}"),
)  # fmt: skip
#: ... and, where the CSV has the memory floor (benchmarks/peak.py), each column's % of the
#: roofline and which bound it is
FAIR_ROOFLINE_COLUMNS = FAIR_COLUMNS + (
    Col(
        "% of roofline H / MS / PyTorch (bound)",
        "{heronlike_pct_roofline:.0f} / {ms_pct_roofline:.0f} / {pytorch_pct_roofline:.0f} "
        "({bound})",
    ),
)


#: heronlike alone at 64 trials against PyTorch (no MetaSchedule): how near the peak it gets
#: given the budget, and how near its own tuning-time best the harness finds it
BUDGET_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("heronlike ms (harness)", "{heronlike_ms:.4f}"),
    Col("heronlike ms (tuning best)", "{heronlike_tuning_best_ms:.4f}"),
    Col("PyTorch ms", "{pytorch_ms:.4f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("% of peak heronlike / PyTorch", "{heronlike_pct_peak:.0f} / {pytorch_pct_peak:.0f}"),
    Col(
        "% of peak at the tuning best", lambda r: f"{_tuning_best_pct(r):.0f}" if "gop" in r else ""
    ),
    Col("vpdpbusd in asm", "{heronlike_vnni}"),
    Col("trials to 95 %", "{heronlike_trials_to_95}"),
)


def _tuning_best_pct(row: Row) -> float:
    """% of the measured peak at the tune's own best latency (not the harness's)."""
    return 100 * row["gop"] / (row["heronlike_tuning_best_ms"] * 1e-3) / row["peak_gops"]


def _us(row: Row, col: str) -> str:
    """``row[col]`` (milliseconds) in microseconds, one decimal; blank in a summary row."""
    return f"{row[col] * 1e3:.1f}" if isinstance(row.get(col), int | float) else ""


#: ... and the most of the peak a kernel can reach after TVM's parallel launch and join
LAUNCH_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("compute floor µs", lambda r: _us(r, "compute_floor_ms")),
    Col(
        "heronlike µs: harness / fastest process / tuning best",
        lambda r: (
            " / ".join(
                _us(r, c)
                for c in (
                    "heronlike_ms",
                    "heronlike_fastest_process_ms",
                    "heronlike_tuning_best_ms",
                )
            )
            if "gop" in r
            else ""
        ),
    ),
    Col(
        "% of peak: harness / fastest process / tuning best",
        lambda r: (
            (
                f"{r['heronlike_pct_peak']:.0f} / {r['heronlike_pct_peak_fastest_process']:.0f}"
                f" / {_tuning_best_pct(r):.0f}"
            )
            if "gop" in r
            else ""
        ),
    ),
    Col("% of peak the launch leaves", "{launch_ceiling_pct:.1f}"),
    Col("PyTorch µs", lambda r: _us(r, "pytorch_ms")),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
)


def launch_summary(rows: list[Row]) -> list[Row]:
    """The launch table's geomean against PyTorch, its rows at >= 90 % of peak (harness,
    fastest process, tuning best) and the rows whose launch leaves less than 92 %."""
    rows = [r for r in rows if isinstance(r.get("launch_ceiling_pct"), int | float)]
    out = geomean("case", "geomean", ("speedup_vs_pytorch",))(rows)[0]

    def count(pct: Callable[[Row], float]) -> int:
        return sum(pct(r) >= 90 for r in rows)

    cramped = [r["case"] for r in rows if r["launch_ceiling_pct"] < 92]
    launches = sorted({f"{r['launch_us']:.2f}" for r in rows})
    out["shape_run"] = (
        f"rows at >= 90 % of peak: {count(lambda r: r['heronlike_pct_peak'])} of {len(rows)} "
        f"(fastest process {count(lambda r: r['heronlike_pct_peak_fastest_process'])}, tuning "
        f"best {count(_tuning_best_pct)}); launch {' and '.join(launches)} µs; the launch leaves "
        f"under 92 % on {len(cramped)}: {', '.join(cramped)}"
    )
    return [out]


def budget_summary(rows: list[Row]) -> list[Row]:
    """The 64-trial table's geomean against PyTorch and its rows at or above 90 % of peak."""
    out = geomean("case", "geomean", ("speedup_vs_pytorch",))(rows)[0]
    harness = sum(r["heronlike_pct_peak"] >= 90 for r in rows)
    tuning = sum(_tuning_best_pct(r) >= 90 for r in rows)
    out["shape_run"] = f"rows at >= 90 % of peak: {harness} of {len(rows)} (tuning best: {tuning})"
    return [out]


def fair_geomeans(cols: tuple[str, ...]):
    """The fair table's geometric means of ``cols``: over all rows and over the rows where both
    best kernels use VNNI (the README's pair)."""
    return both(
        geomean("case", "geomean, all rows", cols),
        geomean(
            "case",
            "geomean, rows where both use VNNI",
            cols,
            where=lambda r: r.get("both_vnni") == "True",  # CSV cells stay text
        ),
    )


#: benchmarks/amx.py compare: AMX tiles against VNNI and PyTorch (oneDNN), one harness
AMX_COLUMNS = (
    Col("case", "{case}"),
    Col("shape", "{shape_run}"),
    Col("amx ms", "{amx_ms:.4g}"),
    Col("dlboost (VNNI) ms", "{dlboost_ms:.4g}"),
    Col("PyTorch ms", "{pytorch_ms:.4g}"),
    Col("amx vs PyTorch", "{amx_vs_pytorch:.2f}"),
    Col("amx vs dlboost", "{amx_vs_dlboost:.2f}"),
    Col("% of AMX peak: amx / PyTorch", "{amx_pct_amx_peak:.0f} / {pytorch_pct_amx_peak:.0f}"),
    Col("dlboost % of VNNI peak", "{dlboost_pct_vnni_peak:.0f}"),
    Col("PyTorch's fastest path", lambda r: _torch_path(r.get("pytorch_impl") or "")),
    Col("amx % of memory floor", "{amx_pct_floor:.0f}"),
    Col("bit-exact amx / dlboost", "{amx_exact} / {dlboost_exact}"),
)


def _refusal(failures: str | None) -> str:
    """``"UnsupportedShapeError: amx bf16: …; why. TVM …"`` -> the error's reason, short."""
    reason = (failures or "").partition(": ")[2].partition(". ")[0]
    return reason.removeprefix("amx bf16: ").replace("stage Y: ", "")


def _torch_path(impl: str) -> str:
    """``torch.ao.nn.quantized.Linear (onednn engine, …) [also: …]`` -> ``Linear (onednn)``;
    empty for a summary row."""
    if not impl:
        return ""
    name, _, rest = impl.partition(" (")
    engine = rest.split(" engine")[0] if " engine" in rest.split(")")[0] else rest.split(",")[0]
    return f"{name.rsplit('.', 1)[-1]} ({engine})"


AMX_GEOMEANS = geomean("case", "geomean", ("amx_vs_pytorch", "amx_vs_dlboost"))
AMX_CMD = "python benchmarks/amx.py compare --cases G1,B1,C2D1,C1D3 --trials 200"
AMX_MACHINE = (
    "{cpu_model} ({cpu_signature}; AMX, AVX512-VNNI), {threads} threads, {trials} trials per "
    "target, measured peaks: AMX {amx_peak:.0f}, VNNI {vnni_peak:.0f} G op/s",
)

#: the equal-trials speedups' (FAIR_GEOMEANS adds the rows where both use the mode's intrinsic)
FAIR_HEADLINE_GEOMEANS = fair_geomeans(("speedup_vs_ms", "speedup_vs_pytorch"))


def intrinsic_geomean(cols: tuple[str, ...]):
    """The fair table's geometric mean of ``cols`` over the rows where both best kernels use
    the mode's intrinsic (its instruction found in their assembly)."""
    return geomean(
        "case",
        "geomean, rows where both use the intrinsic",
        cols,
        where=lambda r: (
            r.get("heronlike_uses_intrinsic") == "True" and r.get("ms_uses_intrinsic") == "True"
        ),
    )


FAIR_GEOMEANS = both(
    FAIR_HEADLINE_GEOMEANS, intrinsic_geomean(("speedup_vs_ms", "speedup_vs_pytorch"))
)

#: the fair table on VNNI: the same, and heronlike given MetaSchedule's search time (its tune
#: continued; the harness's time of that kernel against MetaSchedule's) with its trials by then
FAIR_VNNI_COLUMNS = FAIR_ROOFLINE_COLUMNS + (
    Col("vs MS, equal wall time", "{speedup_vs_ms_at_eq_wall:.2f}"),
    Col(
        "heronlike trials in MS's search s",
        "{heronlike_eq_wall_trials} in {heronlike_eq_wall_search_s:.0f} / {eq_wall_s:.0f}",
    ),
)
FAIR_VNNI_GEOMEANS = fair_geomeans(
    ("speedup_vs_ms", "speedup_vs_pytorch", "speedup_vs_ms_at_eq_wall")
)
#: each column's fastest process's median as % of the machine's peak (suite.py since 2026-12-02)
PCT_PEAK_FASTEST_COL = Col(
    "% of peak H / MS / PyTorch, fastest process",
    "{heronlike_pct_peak_fastest_process:.0f} / {ms_pct_peak_fastest_process:.0f} / "
    "{pytorch_pct_peak_fastest_process:.0f}",
)
#: the fair table on VNNI timed by the harness of 2026-12-02 (5 processes of 9 samples): beside
#: the median over all processes' samples, each column's fastest process's median, and the
#: ratios and % of peak from those (every column the same statistic)
FAIR_VNNI_FASTEST_COLUMNS = FAIR_VNNI_COLUMNS + (
    Col("vs MS, fastest process", "{speedup_vs_ms_fastest_process:.2f}"),
    Col("vs PyTorch, fastest process", "{speedup_vs_pytorch_fastest_process:.2f}"),
    PCT_PEAK_FASTEST_COL,
)
#: heronlike against PyTorch alone (``--no-metaschedule``), one row per case and seed
PYTORCH_SEEDS_COLUMNS = (
    Col("case", "{case}"),
    Col("seed", "{seed}"),
    Col("heronlike ms", "{heronlike_ms:.3f}"),
    Col("PyTorch ms", "{pytorch_ms:.3f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("vs PyTorch, fastest process", "{speedup_vs_pytorch_fastest_process:.2f}"),
    Col("% of peak H / PyTorch", "{heronlike_pct_peak:.0f} / {pytorch_pct_peak:.0f}"),
)
#: the same with the trials heronlike's tune took to reach 95 % of its best
PYTORCH_SEEDS_TRIALS_COLUMNS = (
    *PYTORCH_SEEDS_COLUMNS,
    Col("trials to 95 %", "{heronlike_trials_to_95}"),
)
#: the operators whose rows count towards "% of peak" goals (GEMMs and convolutions)
PEAK_OPS = ("gemm", "bmm", "c1d", "c2d", "c3d", "dil", "t2d")


def _at_90(rows: list[Row], col: str) -> int:
    """How many of ``rows`` have ``col`` (a % of the peak) at 90 or above."""
    return sum(isinstance(r.get(col), int | float) and r[col] >= 90 for r in rows)


def peak_counts(rows: list[Row]) -> list[Row]:
    """A summary row: on the GEMM and convolution rows, how many of each column reach 90 % of
    the measured peak, by the median over all processes and by the fastest process."""
    rows = [r for r in rows if r.get("op") in PEAK_OPS and r.get("heronlike_pct_peak")]
    parts = [
        f"{who} {_at_90(rows, f'{key}_pct_peak')} / "
        f"{_at_90(rows, f'{key}_pct_peak_fastest_process')}"
        for who, key in (("heronlike", "heronlike"), ("MS", "ms"), ("PyTorch", "pytorch"))
    ]
    text = f"of {len(rows)} GEMM/conv rows (all processes / fastest): " + ", ".join(parts)
    return [{"case": "rows at >= 90 % of peak", "shape_run": text}]


#: heronlike against PyTorch with the peak read in the harness's turns beside the run's one
PEAK_TURNS_COLUMNS = (
    Col("case", "{case}"),
    Col("heronlike ms", "{heronlike_ms:.3f}"),
    Col("PyTorch ms", "{pytorch_ms:.3f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col(
        "peak G op/s: the run's / the turns' median (lowest–highest)",
        "{peak_gops:.1f} / {peak_turns_gops:.1f} ({peak_turns_low_gops:.0f}–"
        "{peak_turns_high_gops:.0f})",
    ),
    Col("% of the run's peak H / PyTorch", "{heronlike_pct_peak:.0f} / {pytorch_pct_peak:.0f}"),
    Col(
        "% of each turn's peak H / PyTorch",
        "{heronlike_pct_peak_turns:.0f} / {pytorch_pct_peak_turns:.0f}",
    ),
)


def peak_turn_counts(rows: list[Row]) -> list[Row]:
    """A summary row: on the GEMM and convolution rows, how many of heronlike's and PyTorch's
    reach 90 % of the run's one peak and of each turn's own (``*_pct_peak_turns``)."""
    rows = [r for r in rows if r.get("op") in PEAK_OPS and r.get("heronlike_pct_peak_turns")]
    parts = [
        f"{who} {_at_90(rows, f'{key}_pct_peak')} / {_at_90(rows, f'{key}_pct_peak_turns')}"
        for who, key in (("heronlike", "heronlike"), ("PyTorch", "pytorch"))
    ]
    text = f"of {len(rows)} GEMM/conv rows (the run's peak / each turn's): " + ", ".join(parts)
    return [{"case": f"rows at >= 90 % of peak: {text}"}]


def _num(row: Row, col: str) -> float | None:
    v = row.get(col)
    return float(v) if isinstance(v, int | float) else None


def _within_half(row: Row, unit: str, col: str) -> str:
    """Whether heronlike reached 95 % of the final best (``col``: ``95`` its own, ``target``
    the better of both tuners') within half of MetaSchedule's ``unit`` (``trials`` or ``s``):
    ``"met"``, ``"open"`` (MetaSchedule did not reach it within its budget, and heronlike took
    more than half of that budget, so the ratio is unknown), ``"missed"``, or ``""`` (no
    figures)."""
    h, ms = _num(row, f"heronlike_{unit}_to_{col}"), _num(row, f"ms_{unit}_to_{col}")
    if h is None:
        return "missed" if ms is not None else ""
    if ms is not None:
        return "met" if h <= ms / 2 else "missed"
    budget = _num(row, "ms_trials" if unit == "trials" else "ms_search_s")
    # MetaSchedule needed more than its budget: it took > budget trials (seconds)
    return "met" if budget is not None and h <= (budget + (unit == "trials")) / 2 else "open"


def convergence_counts(rows: list[Row]) -> list[Row]:
    """A summary row: on how many rows heronlike reached 95 % of the final best within half of
    MetaSchedule's trials and of its seconds, by each tuner's own final best and by one target
    for both (95 % of the better final best, the ``*_to_target`` columns)."""
    rows = [r for r in rows if r.get("heronlike_trial_ms") and r.get("ms_trial_ms")]

    def count(unit: str, col: str) -> str:
        got = [_within_half(r, unit, col) for r in rows]
        opened = got.count("open")
        return f"{got.count('met')}" + (f" (+{opened} open)" if opened else "")

    text = (
        f"of {len(rows)} rows, heronlike at 95 % within half of MS's trials / seconds: of its own "
        f"final best {count('trials', '95')} / {count('s', '95')}; of the better final best "
        f"{count('trials', 'target')} / {count('s', 'target')} (open: MS never reached it, "
        "heronlike took over half of MS's budget)"
    )
    return [{"case": "95 % within half of MS", "shape_run": text}]


def half_target_counts(rows: list[Row]) -> list[Row]:
    """A summary row: on how many rows heronlike reached 95 % of the better best after half of
    MetaSchedule's budget within half of MetaSchedule's trials to it (``*_to_half_target``,
    MetaSchedule counted over its whole budget), and on how many by the whole budget's
    target."""
    rows = [r for r in rows if r.get("half_target_95_ms")]
    got = {col: [_within_half(r, "trials", col) for r in rows] for col in ("half_target", "target")}
    parts = [
        f"{got[col].count('met')} met, {got[col].count('missed')} missed, "
        f"{got[col].count('open')} open {what}"
        for col, what in (
            ("half_target", "for the target after half the budget"),
            ("target", "for the target after the whole budget"),
        )
    ]
    text = f"of {len(rows)} rows, heronlike within half of MS's trials: " + "; ".join(parts)
    return [{"case": "95 % within half of MS's trials", "shape_run": text}]


def _half_target_status(r: Row) -> str:
    return _within_half(r, "trials", "half_target") if r.get("ms_trials") is not None else ""


def _trials_to(col: str) -> Cell:
    """``heronlike / MS`` trials to the ``col`` target (``target`` or ``half_target``): ``—``
    where heronlike never reached it, ``> budget`` where MetaSchedule did not; blank on a row
    without the target (a summary row)."""

    def cell(r: Row) -> str:
        if not r.get(f"{col}_95_ms"):
            return ""
        return " / ".join(
            fmt(f"{{{who}_trials_to_{col}}}", r) if r.get(f"{who}_trials_to_{col}") else
            (f"> {r['ms_trials']}" if who == "ms" and r.get("ms_trials") else "—")
            for who in ("heronlike", "ms")
        )  # fmt: skip

    return cell


#: the fair table on VNNI with the one-target convergence columns (suite.py since 2026-12-04)
FAIR_VNNI_TARGET_COLUMNS = FAIR_VNNI_FASTEST_COLUMNS + (
    Col("trials to 95 % of the better best H / MS", _trials_to("target")),
)

#: ... and the most of the peak TVM's parallel launch leaves each row (suite.py since 2026-12-04)
FAIR_VNNI_LAUNCH_COLUMNS = FAIR_VNNI_TARGET_COLUMNS + (
    Col("% of peak the launch leaves", "{launch_ceiling_pct:.1f}"),
)

#: ... with every harness sample labelled by the distance between the cores in its turn
FAIR_VNNI_STATE_COLUMNS = FAIR_VNNI_LAUNCH_COLUMNS + (
    Col("far turns", lambda r: _share(r.get("far_turn_share"))),
    Col("heronlike near / far µs", lambda r: _near_far(r, "heronlike")),
    Col("MetaSchedule near / far µs", lambda r: _near_far(r, "ms")),
    Col("vs MS near / far", lambda r: _near_far(r, "speedup_vs_ms", "", 1, 2)),
)

#: ... with PyTorch's own processes labelled alike, and TVM's launch timed in the kernels' turns
#: (suite.py since 2026-12-05, noon)
FAIR_VNNI_HARNESS_STATE_COLUMNS = FAIR_VNNI_STATE_COLUMNS + (
    Col("far turns PyTorch", lambda r: _share(r.get("pytorch_far_turn_share"))),
    Col("PyTorch near / far µs", lambda r: _near_far(r, "pytorch")),
    Col("vs PyTorch near / far", lambda r: _near_far(r, "speedup_vs_pytorch", "", 1, 2)),
    Col("launch in the harness near / far µs", lambda r: _near_far(r, "launch", "_us", 1, 2)),
    Col(
        "% of peak the harness launch leaves near / far",
        lambda r: _near_far(r, "launch_ceiling", "_pct", 1, 1),
    ),
)

#: each column's median % of the peak read just before its turn (suite.py since 2026-12-07)
PCT_PEAK_TURNS_COL = Col(
    "% of each turn's peak H / MS / PyTorch",
    "{heronlike_pct_peak_turns:.0f} / {ms_pct_peak_turns:.0f} / {pytorch_pct_peak_turns:.0f}",
)
#: ... with the peak read before every turn of the harness's samples (suite.py since 2026-12-07)
FAIR_VNNI_TURNS_COLUMNS = FAIR_VNNI_HARNESS_STATE_COLUMNS + (
    PCT_PEAK_TURNS_COL,
    Col(
        "peak G op/s in the turns (lowest–highest)",
        "{peak_turns_gops:.0f} ({peak_turns_low_gops:.0f}–{peak_turns_high_gops:.0f})",
    ),
)

#: the fair table's geomean columns once each column's fastest process is in the CSV
FAIR_VNNI_FASTEST_SPEEDUPS = (
    "speedup_vs_ms",
    "speedup_vs_pytorch",
    "speedup_vs_ms_at_eq_wall",
    "speedup_vs_ms_fastest_process",
    "speedup_vs_pytorch_fastest_process",
)
#: ... with the kernels' samples labelled near or far (FAIR_VNNI_STATE_COLUMNS)
FAIR_VNNI_STATE_SPEEDUPS = (*FAIR_VNNI_FASTEST_SPEEDUPS, "speedup_vs_ms_near", "speedup_vs_ms_far")
#: ... and PyTorch's alike (FAIR_VNNI_HARNESS_STATE_COLUMNS)
FAIR_VNNI_HARNESS_STATE_SPEEDUPS = (
    *FAIR_VNNI_STATE_SPEEDUPS,
    "speedup_vs_pytorch_near",
    "speedup_vs_pytorch_far",
)

FAIR_VNNI_FASTEST_GEOMEANS = both(
    fair_geomeans(FAIR_VNNI_FASTEST_SPEEDUPS),
    peak_counts,
)
#: PyTorch timed in processes of its own (the fair table's harness) or in the kernel's
#: processes, its samples in the same turns (benchmarks/pytorch_sharing.py)
SHARING_COLUMNS = (
    Col("case", "{case}"),
    Col("run", "{repeat}: {order}"),
    Col("heronlike ms own / shared", "{heronlike_own_ms:.4f} / {heronlike_shared_ms:.4f}"),
    Col("PyTorch ms own / shared", "{pytorch_own_ms:.4f} / {pytorch_shared_ms:.4f}"),
    Col(
        "vs PyTorch own / shared",
        "{speedup_vs_pytorch_own:.3f} / {speedup_vs_pytorch_shared:.3f}",
    ),
    Col("heronlike shared / own", "{heronlike_shared_vs_own:.3f}"),
    Col("PyTorch shared / own", "{pytorch_shared_vs_own:.3f}"),
    Col(
        "fastest process H / PyTorch, own",
        "{heronlike_own_fastest_process_ms:.4f} / {pytorch_own_fastest_process_ms:.4f}",
    ),
    Col(
        "fastest process H / PyTorch, shared",
        "{heronlike_shared_fastest_process_ms:.4f} / {pytorch_shared_fastest_process_ms:.4f}",
    ),
)

#: the finalist-pick rules scored against a later re-measure of every finalist
#: (benchmarks/pick_rule.py)
PICK_RULE_COLUMNS = (
    Col("case", "{case}"),
    Col("seed", "{seed}"),
    Col("finalists' later ms", lambda r: r["later_ms"].replace(";", " / ")),
    Col(
        "fastest of first half: pick, regret", "{min_first_half_pick}, {min_first_half_regret:+.1%}"
    ),
    Col(
        "median of first half: pick, regret",
        "{median_first_half_pick}, {median_first_half_regret:+.1%}",
    ),
)


def pick_rule_summary(rows: list[Row]) -> list[Row]:
    """Mean regret of each rule over the tunes and how often it picked the later-fastest."""
    out: Row = {"case": f"mean over {len(rows)} tunes", "seed": "", "later_ms": ""}
    for rule in ("min_first_half", "median_first_half"):
        regrets = [r[f"{rule}_regret"] for r in rows]
        hits = sum(x == 0 for x in regrets)
        out[f"{rule}_pick"] = f"fastest in {hits}/{len(rows)}"
        out[f"{rule}_regret"] = statistics.fmean(regrets)
    return [out]


#: the Zen 4 table's rows lost or below 90 % of peak at 16 trials, both tuners at 64 trials,
#: beside the 16-trial ratios of the table (joined by case)
SUITE64_ZEN4_CSV = "suite64-vnni-amd-epyc-zen4-2026-12-03.csv"
SUITE64_COLUMNS = (
    Col("case", "{case}"),
    Col("shape run", "{shape_run}"),
    Col("heronlike ms", "{heronlike_ms:.4f}"),
    Col("MetaSchedule ms", "{ms_ms:.4f}"),
    Col("PyTorch ms", "{pytorch_ms:.4f}"),
    Col("vs MS, 16 → 64 trials", "{speedup_vs_ms_before:.2f} → {speedup_vs_ms_after:.2f}"),
    Col(
        "vs PyTorch, 16 → 64 trials",
        "{speedup_vs_pytorch_before:.2f} → {speedup_vs_pytorch_after:.2f}",
    ),
    Col(
        "vs MS / PyTorch, fastest process",
        "{speedup_vs_ms_fastest_process:.2f} / {speedup_vs_pytorch_fastest_process:.2f}",
    ),
    Col(
        "% of peak heronlike, 16 → 64 trials",
        "{heronlike_pct_peak_before:.0f} → {heronlike_pct_peak_after:.0f}",
    ),
    PCT_PEAK_FASTEST_COL,
    Col(
        "% of peak at heronlike's tuning best",
        lambda r: f"{_tuning_best_pct(r):.0f}" if "gop" in r else "",
    ),
    Col("trials to 95 % H / MS", "{heronlike_trials_to_95} / {ms_trials_to_95}"),
    Col("search s H / MS", "{heronlike_search_s:.0f} / {ms_search_s:.0f}"),
)
SUITE64_GEOMEANS = both(
    geomean(
        "case",
        "geomean",
        (
            "speedup_vs_ms_before",
            "speedup_vs_ms_after",
            "speedup_vs_pytorch_before",
            "speedup_vs_pytorch_after",
            "speedup_vs_ms_fastest_process",
            "speedup_vs_pytorch_fastest_process",
        ),
    ),
    peak_counts,
)

#: the fair table measured on a CPU with AVX512-VNNI (both tuners on vpdpbusd), the kernels'
#: samples taken in turn: on an Intel Xeon (PyTorch capped at VNNI) ...
FAIR_VNNI_XEON_CSV = "suite_fair-vnni-intel-xeon-f6m167-2026-12-01.csv"
#: ... and on an Emerald Rapids Xeon (2026-12-05), with SplitAxisNotInnermost and every column
#: (the kernels', PyTorch's, TVM's launch) labelled near or far by its turn's round trip
FAIR_VNNI_XEON_RULE_CSV = "suite_fair-rule-vnni-intel-xeon-emr-2026-12-05.csv"
#: ... and on a Zen 4 (2026-11-28)
FAIR_VNNI_ZEN4_CSV = "suite_fair-vnni-amd-epyc-zen4-2026-11-28.csv"
#: ... and on a Zen 4 again (2026-12-02), timed by 5 processes of 9 samples
FAIR_VNNI_ZEN4_DEC_CSV = "suite_fair-vnni-amd-epyc-zen4-2026-12-02.csv"
#: ... and on a Zen 5 again (2026-12-04), with the code of 2026-12-03 (timed like the Zen 4's)
FAIR_VNNI_ZEN5_DEC4_CSV = "suite_fair-vnni-amd-epyc-zen5-2026-12-04.csv"
#: the fair table on 2026-12-05, each harness round placing the arguments its own way
FAIR_VNNI_ZEN5_DEC5_CSV = "suite_fair-placed-vnni-amd-epyc-zen5-2026-12-05.csv"
#: ... again that morning, every harness sample labelled near or far by its turn's round trip
FAIR_VNNI_ZEN5_LABELLED_CSV = "suite_fair-labelled-vnni-amd-epyc-zen5-2026-12-05.csv"
#: the fair table again that evening, with the launch and one-target columns written by suite.py
FAIR_VNNI_ZEN5_EVENING_CSV = "suite_fair-evening-vnni-amd-epyc-zen5-2026-12-04.csv"
#: heronlike alone on the 37 GEMM/conv rows, with TVM's parallel launch measured per run
PEAK_ROWS_ZEN5_CSV = "suite_peak-rows-vnni-amd-epyc-zen5-2026-12-04.csv"
#: ... and on a Zen 5 (2026-12-01), with the boundary version of the padding guards
FAIR_VNNI_ZEN5_DEC_CSV = "suite_fair-vnni-amd-epyc-zen5-2026-12-01.csv"
#: ... and the Zen 5 run before it (each kernel's samples back to back)
FAIR_VNNI_ZEN5_CSV = "suite_fair-vnni-amd-epyc-zen5-2026-11-28.csv"
FAIR_VNNI_CMD = "python benchmarks/suite.py --table --quick"
#: the fair table on a Zen 4 with the peak read in every turn (2026-12-07)
FAIR_VNNI_ZEN4_TURNS_CSV = "suite_fair-turns-vnni-amd-epyc-zen4-2026-12-07.csv"
#: the summary of a table read against each turn's peak: geomeans, rows at 90 % of the run's
#: peak and of each turn's, convergence counts
FAIR_VNNI_TURNS_SUMMARY = both(
    fair_geomeans(FAIR_VNNI_HARNESS_STATE_SPEEDUPS),
    peak_counts,
    peak_turn_counts,
    convergence_counts,
)
#: ... its rows lost to MetaSchedule or PyTorch (and GV2, even), tuned again at seed 1
LOST_ROWS_SEED1_ZEN4_CSV = "suite_lost-rows-seed1-vnni-amd-epyc-zen4-2026-12-07.csv"
LOST_ROWS_SEED1_COLUMNS = (
    Col("case", "{case}"),
    Col("seed", "{seed}"),
    Col("heronlike ms (tuning-time best)", "{heronlike_ms:.4g} ({heronlike_tuning_best_ms:.4g})"),
    Col("MetaSchedule ms (tuning-time best)", "{ms_ms:.4g} ({ms_tuning_best_ms:.4g})"),
    Col("PyTorch ms", "{pytorch_ms:.4g}"),
    Col("vs MS", "{speedup_vs_ms:.2f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("vs MS, fastest process", "{speedup_vs_ms_fastest_process:.2f}"),
    Col("vs PyTorch, fastest process", "{speedup_vs_pytorch_fastest_process:.2f}"),
    PCT_PEAK_TURNS_COL,
)
#: ... its lost and slowest rows again that morning, the peak probe waiting for its OpenMP
#: threads to sleep before the next sample (before: with a fixed 2 ms pause)
PROBE_FIXED_ZEN4_CSV = "suite_probe-fixed-vnni-amd-epyc-zen4-2026-12-07.csv"
PROBE_FIXED_COLUMNS = (
    Col("case", "{case}"),
    Col("heronlike / MS / PyTorch ms", "{heronlike_ms:.4g} / {ms_ms:.4g} / {pytorch_ms:.4g}"),
    Col("vs MS, 2 ms pause → wait", "{speedup_vs_ms_before:.2f} → {speedup_vs_ms_after:.2f}"),
    Col(
        "vs MS, fastest process, pause → wait",
        "{speedup_vs_ms_fastest_process_before:.2f} → {speedup_vs_ms_fastest_process_after:.2f}",
    ),
    Col(
        "vs PyTorch, pause → wait",
        "{speedup_vs_pytorch_before:.2f} → {speedup_vs_pytorch_after:.2f}",
    ),
    Col(
        "vs PyTorch, fastest process, pause → wait",
        "{speedup_vs_pytorch_fastest_process_before:.2f} → "
        "{speedup_vs_pytorch_fastest_process_after:.2f}",
    ),
    Col(
        "% of each turn's peak heronlike, pause → wait",
        "{heronlike_pct_peak_turns_before:.0f} → {heronlike_pct_peak_turns_after:.0f}",
    ),
    PCT_PEAK_TURNS_COL,
    PCT_PEAK_FASTEST_COL,
)


def probe_fixed_counts(rows: list[Row]) -> list[Row]:
    """A summary row: how many GEMM and convolution rows reach 90 % of each turn's peak,
    before the fix (the table's run) and after (this one), heronlike's and PyTorch's."""
    rows = [r for r in rows if r.get("op") in PEAK_OPS and r.get("heronlike_pct_peak_turns")]
    text = (
        f"of these {len(rows)} GEMM/conv rows, heronlike "
        f"{_at_90(rows, 'heronlike_pct_peak_turns_before')} → "
        f"{_at_90(rows, 'heronlike_pct_peak_turns_after')}, PyTorch (after) "
        f"{_at_90(rows, 'pytorch_pct_peak_turns')}"
    )
    return [{"case": f"rows at >= 90 % of each turn's peak: {text}"}]


PROBE_FIXED_GEOMEANS = both(
    geomean(
        "case",
        "geomean",
        (
            "speedup_vs_ms_before",
            "speedup_vs_ms_after",
            "speedup_vs_ms_fastest_process_before",
            "speedup_vs_ms_fastest_process_after",
            "speedup_vs_pytorch_before",
            "speedup_vs_pytorch_after",
            "speedup_vs_pytorch_fastest_process_before",
            "speedup_vs_pytorch_fastest_process_after",
        ),
    ),
    probe_fixed_counts,
)
#: the whole fair table on that Zen 4 again that morning, with the probe that waits for its threads
FAIR_VNNI_ZEN4_WAITS_CSV = "suite_fair-probe-waits-vnni-amd-epyc-zen4-2026-12-07.csv"
#: ... its rows lost to MetaSchedule (D2, GV3) and its lowest % of peak (T6), tuned and timed again
RERUN_D2_ZEN4_CSV = "suite_rerun-d2-gv3-t6-vnni-amd-epyc-zen4-2026-12-07.csv"
#: ... T4 and T6 again that noon, their placement's zeros stored between the reduction's steps
SPREAD_T4_T6_ZEN4_CSV = "suite_spread-zeros-t4-t6-vnni-amd-epyc-zen4-2026-12-07.csv"


def fair_vnni_turns_table(name: str, csv: str) -> Table:
    """One whole fair table (``--table --quick``) on a VNNI CPU, read against the peak of each
    turn of the harness's samples, with its summary rows."""
    return Table(
        name, (csv,), FAIR_VNNI_TURNS_COLUMNS, FAIR_VNNI_CMD, summary=FAIR_VNNI_TURNS_SUMMARY
    )


def rerun_columns(again: str | dict[str, str]) -> tuple[Col, ...]:
    """The columns of rows run again beside the same rows of the whole table of that morning
    (:data:`FAIR_VNNI_ZEN4_WAITS_CSV`); the run column names the second run ``again`` (or each
    other file's rows by its name in ``{file: name}``)."""

    def run(r: Row) -> str:
        if r["_file"] == FAIR_VNNI_ZEN4_WAITS_CSV:
            return "the table"
        return again if isinstance(again, str) else again[r["_file"]]

    return (
        Col("case", "{case}"),
        Col("run", run),
        *LOST_ROWS_SEED1_COLUMNS[2:5],
        Col("vs MS", "{speedup_vs_ms:.2f}"),
        Col("vs MS, fastest process", "{speedup_vs_ms_fastest_process:.2f}"),
        Col("far turns", lambda r: _share(r.get("far_turn_share"))),
        Col("vs MS near / far", lambda r: _near_far(r, "speedup_vs_ms", "", 1, 2)),
        Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
        PCT_PEAK_TURNS_COL,
    )


RERUN_D2_COLUMNS = rerun_columns("again")
#: the products of K <= 128 below 90 % again, tuned with the Zen 4 prior (2026-12-07 evening)
ZEN4_PRIOR_ROWS_CSV = "suite_zen4-prior-rows-vnni-amd-epyc-zen4-2026-12-07.csv"
#: ... and with the Zen 4 prior refitted with write_back.outside, the one shipped (18:12-18:29)
ZEN4_PRIOR_WB_ROWS_CSV = "suite_zen4-prior-write-back-rows-vnni-amd-epyc-zen4-2026-12-07.csv"
#: the whole fair table on the Zen 4 with PRIOR_ZEN4 (write_back.outside), that evening
FAIR_VNNI_ZEN4_PRIOR_CSV = "suite_fair-zen4-prior-vnni-amd-epyc-zen4-2026-12-07.csv"
#: ... its lost rows tuned again with PRIOR_ZEN4's parallel.balance held at PRIOR's
ZEN4_BALANCE_ROWS_CSV = "suite_zen4-balance-rows-vnni-amd-epyc-zen4-2026-12-07.csv"
ZEN4_BALANCE_ROWS = ("GV1", "GV4", "D1", "C3D1", "C3D5")
#: ... the matrix-vector rows and D1 tuned again with parallel.speedup in PRIOR_ZEN4
ZEN4_SPEEDUP_ROWS_CSV = "suite_zen4-speedup-rows-vnni-amd-epyc-zen4-2026-12-07.csv"
ZEN4_SPEEDUP_ROWS = ("GV1", "GV2", "GV3", "GV4", "GV5", "D1")
#: ... and the table's other rows where both use VNNI, the morning after
ZEN4_SPEEDUP_REST_CSV = "suite_zen4-speedup-rest-vnni-amd-epyc-zen4-2026-12-08.csv"
#: ... and C3D6, which that run left out
ZEN4_SPEEDUP_C3D6_CSV = "suite_zen4-speedup-c3d6-vnni-amd-epyc-zen4-2026-12-08.csv"
#: the whole fair table again in one run with parallel.speedup in PRIOR_ZEN4 (2026-12-08)
FAIR_VNNI_ZEN4_SPEEDUP_CSV = "suite_fair-zen4-speedup-vnni-amd-epyc-zen4-2026-12-08.csv"
#: ... and the 12 held-out cases' rows and the padded 3-D convolutions with it
ZEN4_SPEEDUP_HELD_CSV = "suite_zen4-speedup-held-rows-vnni-amd-epyc-zen4-2026-12-07.csv"
ZEN4_SPEEDUP_HELD = (
    "B1", "B3", "C2D2", "C2D4", "C1D1", "D2", "T2", "T4", "T6", "C3D1", "C3D3", "C3D5",
)  # fmt: skip
ZEN4_PRIOR_ROWS = ("C2D2", "D2", "T2", "B1", "B3", "C2D4", "T4", "T6")
#: the 12 rows of the Emerald Rapids table whose convergence count was open, both tuners given
#: twice the budget (2026-12-05)
OPEN_ROWS32_XEON_EMR_CSV = "suite_open-rows32-vnni-intel-xeon-emr-2026-12-05.csv"
OPEN_ROWS32_CMD = (
    "python benchmarks/suite.py --quick --trials 32 --no-equal-wall "
    "--cases G1,C1D5,C2D2,C2D4,C2D5,C3D5,D5,T1,T4,T5,T6,S3"
)
#: the five scans of the Emerald Rapids table again, after the zero triangle of the scan matrix
#: was skipped and that matrix written one vector store per packed tile (2026-12-05 evening)
SCANS_XEON_EMR_CSV = "suite_scans-vnni-intel-xeon-emr-2026-12-05.csv"
SCANS_CMD = "python benchmarks/suite.py --quick --cases S1,S2,S3,S4,S5 --no-equal-wall"
#: the padded 3-D convolutions after all guards became branch-free versions (2026-12-06)
C3D_XEON_EMR_CSV = "suite_c3d-vnni-intel-xeon-emr-2026-12-06.csv"
C3D_CMD = "python benchmarks/suite.py --quick --cases C3D5,C3D3,C3D1 --no-equal-wall"
#: ... and the same three on one core: every tuner, kernel and PyTorch on one thread (2026-12-06)
C3D_1CORE_XEON_EMR_CSV = "suite_c3d-1core-vnni-intel-xeon-emr-2026-12-06.csv"
C3D_1CORE_CMD = C3D_CMD + ' --target "dlboost -num-cores=1"'
#: a one-core run's columns: medians, each column's fastest process and % of the one-core peak
ONE_CORE_COLUMNS = (
    Col("case", "{case}"),
    Col("threads", "{threads}"),
    Col("heronlike ms", "{heronlike_ms:.3f}"),
    Col("MetaSchedule ms", "{ms_ms:.3f}"),
    Col("PyTorch ms", "{pytorch_ms:.3f}"),
    Col("vs MS", "{speedup_vs_ms:.2f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("vs PyTorch, fastest process", "{speedup_vs_pytorch_fastest_process:.2f}"),
    Col("% of peak H / PyTorch", "{heronlike_pct_peak:.0f} / {pytorch_pct_peak:.0f}"),
    Col("peak G op/s", "{peak_gops:.0f}"),
)
#: ten convolutions of the Emerald Rapids table with int32 outputs and, in turn case by case,
#: with heronlike's requantisation epilogue (int8 outputs, as PyTorch's) for both tuners
REQUANTIZE_XEON_EMR_CSV = "suite_requantize-vnni-intel-xeon-emr-2026-12-06.csv"
REQUANTIZE_INT32_XEON_EMR_CSV = "suite_requantize-int32-vnni-intel-xeon-emr-2026-12-06.csv"
REQUANTIZE_CMD = (
    "python benchmarks/suite.py --quick --no-equal-wall --cases C  (then the same with "
    "--requantize), case by case: C3D1 T4 C3D3 C2D4 C3D5 T6 C1D5 C2D2 C1D2 C2D1"
)
#: ... and the three padded 3-D convolutions again with seed 1 (both tuners)
REQUANTIZE_S1_XEON_EMR_CSV = "suite_requantize-seed1-vnni-intel-xeon-emr-2026-12-06.csv"
REQUANTIZE_S1_INT32_XEON_EMR_CSV = "suite_requantize-seed1-int32-vnni-intel-xeon-emr-2026-12-06.csv"
REQUANTIZE_S1_CMD = (
    "python benchmarks/suite.py --quick --no-equal-wall --seed 1 --cases C  (then the same with "
    "--requantize), case by case: C3D1 C3D3 C3D5"
)
#: ... and C3D3 at two more seeds, heronlike and PyTorch only, int32 outputs
C3D3_SEEDS_XEON_EMR_CSV = "suite_c3d3-seeds-vnni-intel-xeon-emr-2026-12-06.csv"
C3D3_SEEDS_CMD = (
    "python benchmarks/suite.py --quick --cases C3D3 --seed S --no-metaschedule --no-equal-wall"
    "  (S = 2, 3)"
)
#: int32 outputs (before) against int8 outputs (after), each run's ratios within itself
REQUANTIZE_COLUMNS = (
    Col("case", "{case}"),
    Col("heronlike ms, int32 / int8 out", "{heronlike_ms_before:.3f} / {heronlike_ms_after:.3f}"),
    Col("MS ms, int32 / int8 out", "{ms_ms_before:.3f} / {ms_ms_after:.3f}"),
    Col("PyTorch ms (u8 out), in each run", "{pytorch_ms_before:.3f} / {pytorch_ms_after:.3f}"),
    Col("vs MS, int32 / int8", "{speedup_vs_ms_before:.2f} / {speedup_vs_ms_after:.2f}"),
    Col(
        "vs PyTorch, int32 / int8",
        "{speedup_vs_pytorch_before:.2f} / {speedup_vs_pytorch_after:.2f}",
    ),
    Col(
        "vs PyTorch, fastest process, int32 / int8",
        "{speedup_vs_pytorch_fastest_process_before:.2f} / "
        "{speedup_vs_pytorch_fastest_process_after:.2f}",
    ),
    Col(
        "% of peak heronlike, int32 / int8",
        "{heronlike_pct_peak_before:.0f} / {heronlike_pct_peak_after:.0f}",
    ),
    Col("peak G op/s, int32 / int8 run", "{peak_gops_before:.0f} / {peak_gops_after:.0f}"),
)
#: the 13 small cases whose space SplitAxisNotInnermost changes, tuned again with it (2026-12-05)
SUITE_SPLIT_AXIS_CSV = "suite_split_axis-vnni-amd-epyc-zen5-2026-12-05.csv"
#: eight of the fair table's cases with every harness sample labelled by the core-to-core round
#: trip of its turn (2026-12-05)
SUITE_CORE_STATE_CSV = "suite_core_state-vnni-amd-epyc-zen5-2026-12-05.csv"
SUITE_CORE_STATE_CMD = "python benchmarks/suite.py --quick --cases C2D2,D2,T2,C3D4,D3,GV2,C2D1,G3"
#: the fair table on a Zen 3 without VNNI (both tuners on the vpmaddwd intrinsic): 2026-11-27,
#: before the equal-wall-time column ...
FAIR_GENERAL_ZEN3_NOV_CSV = "suite_fair-general-vpmaddwd-amd-epyc-zen3-2026-11-27.csv"
#: ... and 2026-12-02, with it (the cases that ran before the session's time was spent)
FAIR_GENERAL_ZEN3_DEC_CSV = "suite_fair-general-vpmaddwd-amd-epyc-zen3-2026-12-02.csv"
#: ... and again that day with pre-widened A (-widen-a, the new default), same budget
FAIR_GENERAL_ZEN3_WIDEN_A_CSV = "suite_fair-general-vpmaddwd-widen-a-amd-epyc-zen3-2026-12-02.csv"


def ms_before_after_geomean(label: str) -> Callable[[list[Row]], list[Row]]:
    """The geomean row of a :func:`joined_with_before` table's MetaSchedule ratios, over the
    cases where MetaSchedule ran in both runs."""
    return geomean(
        "case",
        label,
        ("speedup_vs_ms_before", "speedup_vs_ms_after"),
        where=lambda r: bool(r["speedup_vs_ms_before"] and r["speedup_vs_ms_after"]),
    )


#: the two 2026-12-02 runs side by side, case by case
WIDEN_A_FAIR_COLUMNS = (
    Col("case", "{case}"),
    Col("heronlike ms, before / after", "{heronlike_ms_before:.3f} / {heronlike_ms_after:.3f}"),
    Col("heronlike, after vs before", "{heronlike_gain:.2f}"),
    Col("MS ms, before / after", "{ms_ms_before:.3f} / {ms_ms_after:.3f}"),
    Col("PyTorch ms, before / after", "{pytorch_ms_before:.3f} / {pytorch_ms_after:.3f}"),
    Col("vs MS, before", "{speedup_vs_ms_before:.2f}"),
    Col("vs MS, after", "{speedup_vs_ms_after:.2f}"),
    Col("vs PyTorch, before", "{speedup_vs_pytorch_before:.2f}"),
    Col("vs PyTorch, after", "{speedup_vs_pytorch_after:.2f}"),
    Col(
        "% of peak heronlike, before / after",
        "{heronlike_pct_peak_before:.0f} / {heronlike_pct_peak_after:.0f}",
    ),
)
#: its geomeans
WIDEN_A_FAIR_GEOMEANS = both(
    geomean(
        "case",
        "geomean",
        ("heronlike_gain", "speedup_vs_pytorch_before", "speedup_vs_pytorch_after"),
    ),
    ms_before_after_geomean("geomean, rows where MetaSchedule ran both times"),
)
#: the fair table's convolutions on a Zen 2 without VNNI (2026-12-03, padding guards back,
#: eb7b5fd), the strided 1 x 1 rows re-run with the strided int16 copy (reindex) ...
FAIR_GENERAL_ZEN2_CSV = "suite_fair-general-vpmaddwd-widen-a-amd-epyc-zen2-2026-12-03.csv"
#: ... those rows as they ran first, copying all of A to int16
FAIR_GENERAL_ZEN2_FULL_COPY_CSV = (
    "suite_fair-general-vpmaddwd-widen-a-full-copy-amd-epyc-zen2-2026-12-03.csv"
)
#: two machines' runs side by side, case by case: only ratios within one run compare
ZEN2_VS_ZEN3_COLUMNS = (
    Col("case", "{case}"),
    Col(
        "vs PyTorch, Zen 3 / Zen 2",
        "{speedup_vs_pytorch_before:.2f} / {speedup_vs_pytorch_after:.2f}",
    ),
    Col("vs MS, Zen 3 / Zen 2", "{speedup_vs_ms_before:.2f} / {speedup_vs_ms_after:.2f}"),
    Col(
        "% of peak heronlike, Zen 3 / Zen 2",
        "{heronlike_pct_peak_before:.0f} / {heronlike_pct_peak_after:.0f}",
    ),
)
#: its geomeans
ZEN2_VS_ZEN3_GEOMEANS = both(
    geomean("case", "geomean", ("speedup_vs_pytorch_before", "speedup_vs_pytorch_after")),
    ms_before_after_geomean("geomean, rows where MetaSchedule ran on both"),
)
#: its geomeans: all rows, and the rows where both best kernels use the intrinsic
_FAIR_GENERAL_RATIOS = ("speedup_vs_ms", "speedup_vs_pytorch", "speedup_vs_ms_at_eq_wall")
FAIR_GENERAL_GEOMEANS = both(
    geomean("case", "geomean, all rows", _FAIR_GENERAL_RATIOS),
    intrinsic_geomean(_FAIR_GENERAL_RATIOS),
)
#: the fair table's quick cases and the VNNI machines' lost rows on a Zen 1 without VNNI
#: (2026-12-06, the code of the Emerald Rapids sessions: branch-free guard versions)
FAIR_GENERAL_ZEN1_CSV = "suite_fair-general-amd-epyc-zen1-2026-12-06.csv"
#: its geomeans: all rows, rows where both use the intrinsic, with each column's fastest
#: process beside, the rows at 90 % of the peak and the convergence counts
FAIR_GENERAL_ZEN1_SUMMARY = both(
    geomean("case", "geomean, all rows", FAIR_VNNI_HARNESS_STATE_SPEEDUPS),
    intrinsic_geomean(FAIR_VNNI_HARNESS_STATE_SPEEDUPS),
    peak_counts,
    convergence_counts,
)
#: the padding guards (none / outer / all / all in one version) on a Zen 5
PADDING_SKIP_ZEN5_CSV = "padding_skip-amd-epyc-f26m2-2026-12-01.csv"
#: the README's summary of the fair DL Boost tables, one row per machine: its short name and
#: the docs/results.md section of its table
FAIR_MACHINES = {
    FAIR_VNNI_ZEN4_SPEEDUP_CSV: (
        "AMD EPYC Zen 4 (its own prior)",
        "the-fair-table-on-a-zen-4-with-the-launch-in-its-prior-2026-12-08",
    ),
    "suite_fair-rule-vnni-intel-xeon-emr-2026-12-05.csv": (
        "Intel Xeon, Emerald Rapids (PyTorch capped at VNNI)",
        "the-fair-table-on-an-emerald-rapids-xeon-2026-12-05-every-column-labelled-near-or-far",
    ),
    "suite_fair-labelled-vnni-amd-epyc-zen5-2026-12-05.csv": (
        "AMD EPYC Zen 5",
        "the-fair-table-on-a-zen-5-2026-12-05-every-sample-labelled-by-the-distance-of-the-cores",
    ),
    "suite_fair-vnni-intel-xeon-f6m167-2026-12-01.csv": (
        "Intel Xeon (PyTorch capped at VNNI)",
        "the-fair-table-on-an-intel-xeon-vnni-pytorch-capped-at-vnni",
    ),
}


def fair_machine_row(raw: list[Row]) -> list[Row]:
    """One fair-table CSV as one row of the README's summary: its geometric means over the rows
    where both best kernels use VNNI, how many of those rows heronlike loses (below 0.99x), and
    how many GEMM/convolution rows reach 90 % of the measured peak (median over all processes)."""
    measured = [r for r in raw if isinstance(r.get("heronlike_ms"), int | float)]
    both_rows = [r for r in measured if r.get("both_vnni") == "True"]
    label, anchor = FAIR_MACHINES[raw[0]["_file"]]
    out: Row = {
        "_file": raw[0]["_file"],
        "date": raw[0]["date"],
        "machine": f"[{label}](docs/results.md#{anchor})",
        "rows": f"{len(both_rows)} of {len(measured)}",
    }
    for col in ("speedup_vs_ms", "speedup_vs_ms_at_eq_wall", "speedup_vs_pytorch"):
        vals = [r[col] for r in both_rows if isinstance(r.get(col), int | float)]
        out[col] = _gm(vals) if vals else None
    lost = [
        sum(isinstance(r.get(col), int | float) and r[col] < 0.99 for r in both_rows)
        for col in ("speedup_vs_ms", "speedup_vs_pytorch")
    ]
    out["lost"] = f"{lost[0]} / {lost[1]}"
    peak_rows = [r for r in raw if r.get("op") in PEAK_OPS and r.get("heronlike_pct_peak")]
    at90 = sum(float(r["heronlike_pct_peak"]) >= 90 for r in peak_rows)
    out["at_90"] = f"{at90} of {len(peak_rows)}"
    return [out]


FAIR_MACHINE_COLUMNS = (
    Col("machine (table)", "{machine}"),
    Col("date", "{date}"),
    Col("rows where both use VNNI", "{rows}"),
    Col("vs MS, equal trials", "{speedup_vs_ms:.2f}"),
    Col("vs MS, equal wall time", "{speedup_vs_ms_at_eq_wall:.2f}"),
    Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
    Col("rows lost to MS / PyTorch", "{lost}"),
    Col("GEMM/conv rows ≥ 90 % of peak", "{at_90}"),
)

TC_MACHINE = ("{gpu} (sm {compute_capability}, driver {driver}, PyTorch {torch})",)
TC_COLUMNS = (
    Col("case", "{case}"),
    Col("shape", "{shape}"),
    Col("heronlike ms (TFLOP/s)", "{heronlike_ms:.4g} ({heronlike_tflops:.3g})"),
    Col("PyTorch ms (TFLOP/s)", "{baseline_ms:.4g} ({baseline_tflops:.3g})"),
    Col("heronlike speed / PyTorch's", "{ratio:.2f}"),
    Col("vs fp32-output `torch.mm`", "{ratio_fp32out:.2f}"),
    Col("vs fastest PyTorch run", "{ratio_fastest:.2f}"),
)
TC_GEOMEANS = both(
    geomean("case", "geomean, all cases", ("ratio",)),
    geomean("case", "geomean, GEMMs", ("ratio",), where=lambda r: r.get("op") == "gemm"),
)
TC_CMD = "python benchmarks/tensorcore.py bundle|import|finish|report (docs/tensorcore.md)"

VTA_MACHINE = ("cycles simulated on {cpu}",)
VTA_COLUMNS = (
    Col("case", "{case}"),
    Col("shape", "{op} {shape}"),
    Col("heronlike cycles", "{heronlike_cycles:,}"),
    Col("% of simulated peak", "{heronlike_pct_peak:.2f}"),
    Col("bit-exact", "{heronlike_bit_exact}"),
    Col("vs AutoTVM space, best point", "{ratio_vs_exhaustive:.3f}×"),
    Col("vs its random search @64", "{ratio_vs_random:.3f}×"),
)

LLVM_COLUMNS = (
    Col("case", "{case}"),
    Col("shape", "{shape}"),
    Col("trials", "{trials}"),
    Col("heronlike ms", "{heronlike_ms:.4g}"),
    Col("MetaSchedule ms", "{ms_ms:.4g}"),
    Col("TVM unscheduled ms", "{unscheduled_ms:.4g}"),
    Col("heronlike speed / MS's", "{ratio_to_ms:.2f}"),
)
LLVM_MACHINE = ("{cpu} ({target})",)
LLVM_CMD = "python benchmarks/llvm_float32.py --cases softmax,layer_norm,depthwise"

EXPLORER_SUMMARY_COLUMNS = (
    Col("explorer", "{label}"),
    Col("best during tuning", "{tuning}"),
    Col("re-measured", "{remeasured}"),
)
SE_TC = "search_efficiency_sim-{}-cuda-tc-t200-h100-80gb-hbm3-2026-11-23_{}.csv"
SE_TC_SPACES = ("gemm1024x1024x1024", "bmm12x512x512x64", "c2d1x56x56x64x64x1x1x1x0x1")
SE_SIM_CMD = "python benchmarks/search_efficiency.py --surrogate RECORDS … (docs/explorers.md)"

TABLES: dict[str, Table] = {
    t.name: t
    for t in [
        # ---- README headlines
        Table(
            "headline-models",
            (
                "models_e2e-resnet50-t1152-amd-epyc-2026-11-25.csv",
                "models_e2e-bert-t320-amd-epyc-2026-11-25.csv",
            ),
            MODEL_COLUMNS,
            MODELS_CMD,
            rows=pivot("engine", ("model",)),
        ),
        Table(
            "headline-dlboost-machines",
            tuple(FAIR_MACHINES),
            FAIR_MACHINE_COLUMNS,
            FAIR_VNNI_CMD,
            rows=fair_machine_row,
        ),
        Table(
            "headline-tensorcore",
            ("tensorcore_h200.csv",),
            TC_COLUMNS[:5],
            TC_CMD,
            where=lambda r: r["op"] == "gemm",
            summary=geomean("case", "geomean, GEMMs", ("ratio",), lambda r: r["op"] == "gemm"),
            machine=TC_MACHINE,
        ),
        Table(
            "headline-amx",
            ("amx_compare-*.csv",),
            AMX_COLUMNS[:1] + AMX_COLUMNS[2:8],
            AMX_CMD,
            summary=AMX_GEOMEANS,
            machine=AMX_MACHINE,
        ),
        Table(
            "headline-vta",
            ("vta_compare.csv",),
            VTA_COLUMNS[:4] + VTA_COLUMNS[5:],
            "python benchmarks/vta_compare.py",
            rows=geomean_row_bold,
            machine=VTA_MACHINE,
        ),
        # ---- docs/results.md: models and libraries
        Table(
            "models-e2e",
            ("models_e2e-*[0-9].csv",),
            (
                *MODEL_COLUMNS,
                Col(
                    "peak memory MB heronlike / ORT",
                    "{heronlike[peak_rss_mb]:.0f} / {onnxruntime[peak_rss_mb]:.0f}",
                ),
                Col(
                    "tuning s heronlike / MS",
                    "{heronlike[tune_s]:.0f} / {metaschedule[tune_s]:.0f}",
                ),
            ),  # fmt: skip
            MODELS_CMD,
            rows=pivot("engine", ("model",)),
        ),
        Table(
            "models-e2e-ops",
            ("models_e2e-*-ops.csv",),
            (
                Col("model @ trials", model_run),
                Col("operator", "{operator}"),
                Col("heronlike ms", "{heronlike_s!k:.2f}"),
                Col("MetaSchedule ms", "{metaschedule_s!k:.2f}"),
                Col("ONNX Runtime ms (profiled)", "{onnxruntime_s!k:.2f}"),
            ),
            MODELS_CMD,
        ),
        *int8_model_tables(
            "models-int8",
            "*-amd-epyc-2026-11-27",
            MODELS_INT8_CMD,
        ),
        *int8_model_tables(
            "models-int8-vnni",
            "*-amd-epyc-f26m2-2026-11-27",
            MODELS_INT8_VNNI_CMD,
        ),
        Table(
            "model-estimate",
            ("model_estimate-*.csv",),
            (
                Col("model", "{model}, batch {batch}, {dtype}"),
                Col("workloads", lambda r: r["_workloads"]),
                Col("trials", "{gradient_trials}"),
                Col("gradient ms", "{gradient_latency_s!k:.0f}"),
                Col("even split ms", "{even_latency_s!k:.0f}"),
                Col(
                    "even / gradient",
                    lambda r: f"{r['even_latency_s'] / r['gradient_latency_s']:.2f}",
                ),
                Col("PyTorch per-layer sum ms", "{torch_latency_s!k:.0f}"),
                Col("PyTorch call", "{torch_impl}"),
            ),  # fmt: skip
            "python benchmarks/model_estimate.py --model resnet50 --trials 126 (bert: --trials 48)",
            rows=estimate_total,
            machine=("{cpu_model} ({target})",),
        ),
        # ---- DL Boost
        Table(
            "suite-default",
            ("suite_default.csv",),
            SUITE_COLUMNS,
            "make bench-suite",
            summary=SUITE_GEOMEANS,
        ),
        Table(  # the fair DL Boost comparison (benchmarks/suite.py's one harness), on VNNI
            "suite-fair-vnni-xeon-f6m167",
            (FAIR_VNNI_XEON_CSV,),
            FAIR_VNNI_COLUMNS,
            FAIR_VNNI_CMD,
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # ... its rows lost to PyTorch, tuned again at 64 trials (heronlike and PyTorch)
            "suite-lost-rows64-xeon-f6m167",
            ("suite_lost_rows64-vnni-intel-xeon-f6m167-2026-12-01.csv",),
            (
                Col("case", "{case}"),
                Col("shape run", "{shape_run}"),
                Col("heronlike ms", "{heronlike_ms:.3f}"),
                Col("PyTorch ms", "{pytorch_ms:.3f}"),
                Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
                Col(
                    "% of peak heronlike / PyTorch",
                    "{heronlike_pct_peak:.0f} / {pytorch_pct_peak:.0f}",
                ),
                Col("trials to 95 %", "{heronlike_trials_to_95}"),
                Col("search s", "{heronlike_search_s:.0f}"),
            ),
            "python benchmarks/suite.py --cases G1,C1D5,C3D3,C3D5,D5 --trials 64 --batch 16 "
            "--no-metaschedule --no-equal-wall",
            summary=geomean("case", "geomean", ("speedup_vs_pytorch",)),
        ),
        Table(  # heronlike alone on the GEMM/conv rows with the parallel launch's ceiling
            "suite-peak-rows-zen5-2026-12-04",
            (PEAK_ROWS_ZEN5_CSV,),
            LAUNCH_COLUMNS,
            "python benchmarks/suite.py --trials 16 --batch 8 --no-metaschedule --no-equal-wall "
            "--cases <the 37 GEMM and convolution cases>",
            summary=launch_summary,
        ),
        # ... on a Zen 4, the peak read before every turn of the harness's samples
        fair_vnni_turns_table("suite-fair-vnni-zen4-2026-12-07-turns", FAIR_VNNI_ZEN4_TURNS_CSV),
        # ... the whole table again that evening, with the Zen 4 prior
        fair_vnni_turns_table(
            "suite-fair-vnni-zen4-2026-12-07-zen4-prior", FAIR_VNNI_ZEN4_PRIOR_CSV
        ),
        Table(  # ... its lost rows tuned again with the prior's balance weight held at PRIOR's
            "suite-zen4-balance-rows-2026-12-07",
            (FAIR_VNNI_ZEN4_PRIOR_CSV, ZEN4_BALANCE_ROWS_CSV),
            rerun_columns(
                {
                    FAIR_VNNI_ZEN4_PRIOR_CSV: "the table (balance held at +1)",
                    ZEN4_BALANCE_ROWS_CSV: "balance held at PRIOR's",
                }
            ),
            f"python benchmarks/suite.py --quick --cases {','.join(ZEN4_BALANCE_ROWS)}  "
            "(the table's rows: the whole table above)",
            where=lambda r: r["case"] in ZEN4_BALANCE_ROWS,
        ),
        Table(  # ... and the matrix-vector rows with parallel.speedup in the prior
            "suite-zen4-speedup-rows-2026-12-07",
            (FAIR_VNNI_ZEN4_PRIOR_CSV, ZEN4_BALANCE_ROWS_CSV, ZEN4_SPEEDUP_ROWS_CSV),
            rerun_columns(
                {
                    FAIR_VNNI_ZEN4_PRIOR_CSV: "the table (balance held at +1)",
                    ZEN4_BALANCE_ROWS_CSV: "balance held at PRIOR's",
                    ZEN4_SPEEDUP_ROWS_CSV: "parallel.speedup",
                }
            ),
            f"python benchmarks/suite.py --quick --cases {','.join(ZEN4_SPEEDUP_ROWS)}  "
            "(the table's rows: the whole table above)",
            where=lambda r: r["case"] in ZEN4_SPEEDUP_ROWS,
        ),
        Table(  # ... and the held-out cases' rows and the padded 3-D convolutions
            "suite-zen4-speedup-held-rows-2026-12-07",
            (FAIR_VNNI_ZEN4_PRIOR_CSV, ZEN4_SPEEDUP_HELD_CSV),
            rerun_columns(
                {
                    FAIR_VNNI_ZEN4_PRIOR_CSV: "the table (balance held at +1)",
                    ZEN4_SPEEDUP_HELD_CSV: "parallel.speedup",
                }
            ),
            f"python benchmarks/suite.py --quick --cases {','.join(ZEN4_SPEEDUP_HELD)}  "
            "(the table's rows: the whole table above)",
            where=lambda r: r["case"] in ZEN4_SPEEDUP_HELD,
        ),
        Table(  # every row where both use VNNI with the parallel.speedup prior, in 3 runs
            "suite-fair-vnni-zen4-2026-12-08-speedup",
            (
                ZEN4_SPEEDUP_ROWS_CSV,
                ZEN4_SPEEDUP_HELD_CSV,
                ZEN4_SPEEDUP_REST_CSV,
                ZEN4_SPEEDUP_C3D6_CSV,
            ),
            FAIR_VNNI_TURNS_COLUMNS,
            f"python benchmarks/suite.py --quick --cases {','.join(ZEN4_SPEEDUP_ROWS)}; "
            f"... --cases {','.join(ZEN4_SPEEDUP_HELD)}; ... --cases <the table's other rows "
            "but the scans and C3D6>; ... --cases C3D6",
            summary=FAIR_VNNI_TURNS_SUMMARY,
        ),
        # ... and the whole table in one run with it
        fair_vnni_turns_table(
            "suite-fair-vnni-zen4-2026-12-08-speedup-table", FAIR_VNNI_ZEN4_SPEEDUP_CSV
        ),
        # ... the whole table again, the peak probe waiting for its threads
        fair_vnni_turns_table(
            "suite-fair-vnni-zen4-2026-12-07-probe-waits", FAIR_VNNI_ZEN4_WAITS_CSV
        ),
        Table(  # ... its lost rows and its lowest % of peak tuned again, beside the table's rows
            "suite-rerun-d2-gv3-t6-zen4-2026-12-07",
            (FAIR_VNNI_ZEN4_WAITS_CSV, RERUN_D2_ZEN4_CSV),
            RERUN_D2_COLUMNS,
            "python benchmarks/suite.py --quick --cases D2,GV3,T6  "
            "(the table's rows: the whole table below)",
            where=lambda r: r["case"] in ("D2", "GV3", "T6"),
        ),
        Table(  # ... the rows below 90 % again with the Zen 4 prior, beside the table's rows
            "suite-zen4-prior-rows-2026-12-07",
            (FAIR_VNNI_ZEN4_WAITS_CSV, ZEN4_PRIOR_ROWS_CSV, ZEN4_PRIOR_WB_ROWS_CSV),
            rerun_columns(
                {
                    ZEN4_PRIOR_ROWS_CSV: "Zen 4 prior",
                    ZEN4_PRIOR_WB_ROWS_CSV: "Zen 4 prior with write_back.outside",
                }
            ),
            f"python benchmarks/suite.py --quick --cases {','.join(ZEN4_PRIOR_ROWS)}  "
            "(the table's rows: the whole table of that morning)",
            where=lambda r: r["case"] in ZEN4_PRIOR_ROWS,
        ),
        Table(  # ... T4 and T6 with their zeros between the reduction's steps, beside its rows
            "suite-spread-zeros-t4-t6-zen4-2026-12-07",
            (FAIR_VNNI_ZEN4_WAITS_CSV, SPREAD_T4_T6_ZEN4_CSV),
            rerun_columns("zeros spread"),
            "python benchmarks/suite.py --quick --cases T4,T6  (the table's rows: the whole table "
            "of that morning)",
            where=lambda r: r["case"] in ("T4", "T6"),
        ),
        Table(  # ... its lost rows tuned again at seed 1, beside seed 0's rows
            "suite-lost-rows-seed1-zen4-2026-12-07",
            (FAIR_VNNI_ZEN4_TURNS_CSV, LOST_ROWS_SEED1_ZEN4_CSV),
            LOST_ROWS_SEED1_COLUMNS,
            "python benchmarks/suite.py --quick --cases B3,C3D1,GV2 --seed 1  "
            "(seed 0: the table above)",
            where=lambda r: r["case"] in ("B3", "C3D1", "GV2"),
        ),
        Table(  # ... its lost and slowest rows with the peak probe's threads waited for
            "suite-probe-fixed-zen4-2026-12-07",
            (PROBE_FIXED_ZEN4_CSV,),
            PROBE_FIXED_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G4,B1,B3,C3D1,C3D3,C3D5,C2D2,C2D4,"
            "C2D6,C3D2,C3D6,D2,D4,D6,T2,T4,T6,GV2",
            before=FAIR_VNNI_ZEN4_TURNS_CSV,
            summary=PROBE_FIXED_GEOMEANS,
        ),
        Table(  # ... on an Emerald Rapids Xeon, with SplitAxisNotInnermost, every column labelled
            "suite-fair-vnni-xeon-emr-2026-12-05-rule",
            (FAIR_VNNI_XEON_RULE_CSV,),
            FAIR_VNNI_HARNESS_STATE_COLUMNS,
            FAIR_VNNI_CMD,
            summary=both(
                fair_geomeans(FAIR_VNNI_HARNESS_STATE_SPEEDUPS),
                peak_counts,
                convergence_counts,
            ),
        ),
        Table(  # ... its 12 rows the convergence count left open, both tuners at 32 trials
            "suite-open-rows32-xeon-emr-2026-12-05",
            (OPEN_ROWS32_XEON_EMR_CSV,),
            (
                Col("case", "{case}"),
                Col("shape run", "{shape_run}"),
                Col("heronlike ms", "{heronlike_ms:.3f}"),
                Col("MetaSchedule ms", "{ms_ms:.3f}"),
                Col("PyTorch ms", "{pytorch_ms:.3f}"),
                Col("vs MS", "{speedup_vs_ms:.2f}"),
                Col("vs PyTorch", "{speedup_vs_pytorch:.2f}"),
                Col("vs MS, fastest process", "{speedup_vs_ms_fastest_process:.2f}"),
                Col("vs PyTorch, fastest process", "{speedup_vs_pytorch_fastest_process:.2f}"),
                PCT_PEAK_FASTEST_COL,
                Col("trials to 95 % of the better best at 16, H / MS", _trials_to("half_target")),
                Col("within half of MS's trials", _half_target_status),
                Col("trials to 95 % of the better best at 32, H / MS", _trials_to("target")),
                Col("search s H / MS", "{heronlike_search_s:.0f} / {ms_search_s:.0f}"),
            ),
            OPEN_ROWS32_CMD,
            summary=both(
                fair_geomeans(
                    (
                        "speedup_vs_ms",
                        "speedup_vs_pytorch",
                        "speedup_vs_ms_fastest_process",
                        "speedup_vs_pytorch_fastest_process",
                    )
                ),
                half_target_counts,
            ),
        ),
        Table(  # ... its five scans again, after the zero triangle was skipped, against noon's
            "suite-scans-xeon-emr-2026-12-05",
            (SCANS_XEON_EMR_CSV,),
            WIDEN_A_FAIR_COLUMNS[:-1],
            SCANS_CMD + "  (before: the noon table above)",
            before=FAIR_VNNI_XEON_RULE_CSV,
            summary=geomean(
                "case",
                "geomean",
                ("heronlike_gain", "speedup_vs_ms_before", "speedup_vs_ms_after")
                + ("speedup_vs_pytorch_before", "speedup_vs_pytorch_after"),
            ),
        ),
        Table(  # ... its padded 3-D convolutions after the branch-free versions, against noon's
            "suite-c3d-xeon-emr-2026-12-06",
            (C3D_XEON_EMR_CSV,),
            (
                *WIDEN_A_FAIR_COLUMNS[:-1],
                Col(
                    "vs PyTorch, fastest process, after", "{speedup_vs_pytorch_fastest_process:.2f}"
                ),
            ),
            C3D_CMD + "  (before: the noon table above)",
            before=FAIR_VNNI_XEON_RULE_CSV,
        ),
        Table(  # ... ten convolutions with int32 and with int8 (requantised) outputs
            "suite-requantize-xeon-emr-2026-12-06",
            (REQUANTIZE_XEON_EMR_CSV,),
            REQUANTIZE_COLUMNS,
            REQUANTIZE_CMD,
            before=REQUANTIZE_INT32_XEON_EMR_CSV,
            summary=geomean(
                "case",
                "geomean",
                ("speedup_vs_pytorch_before", "speedup_vs_pytorch_after")
                + ("speedup_vs_pytorch_fastest_process_before",)
                + ("speedup_vs_pytorch_fastest_process_after",),
            ),
        ),
        Table(  # ... the padded 3-D convolutions again, seed 1
            "suite-requantize-seed1-xeon-emr-2026-12-06",
            (REQUANTIZE_S1_XEON_EMR_CSV,),
            REQUANTIZE_COLUMNS,
            REQUANTIZE_S1_CMD,
            before=REQUANTIZE_S1_INT32_XEON_EMR_CSV,
        ),
        Table(  # ... C3D3 at seeds 2 and 3
            "suite-c3d3-seeds-xeon-emr-2026-12-06",
            (C3D3_SEEDS_XEON_EMR_CSV,),
            (*PYTORCH_SEEDS_COLUMNS, Col("peak G op/s", "{peak_gops:.0f}")),
            C3D3_SEEDS_CMD,
        ),
        Table(  # ... and on one core
            "suite-c3d-1core-xeon-emr-2026-12-06",
            (C3D_1CORE_XEON_EMR_CSV,),
            ONE_CORE_COLUMNS,
            C3D_1CORE_CMD,
        ),
        Table(  # ... on a Zen 5, 2026-12-05, every sample labelled by the distance of the cores
            "suite-fair-vnni-zen5-2026-12-05-labelled",
            (FAIR_VNNI_ZEN5_LABELLED_CSV,),
            FAIR_VNNI_STATE_COLUMNS,
            FAIR_VNNI_CMD,
            summary=both(
                fair_geomeans(FAIR_VNNI_STATE_SPEEDUPS),
                peak_counts,
                convergence_counts,
            ),
        ),
        Table(  # ... on a Zen 5, 2026-12-05, each harness round placing the arguments its own way
            "suite-fair-vnni-zen5-2026-12-05",
            (FAIR_VNNI_ZEN5_DEC5_CSV,),
            FAIR_VNNI_LAUNCH_COLUMNS,
            FAIR_VNNI_CMD,
            summary=both(FAIR_VNNI_FASTEST_GEOMEANS, convergence_counts),
        ),
        Table(  # ... on a Zen 5 that evening, with the launch's ceiling per row
            "suite-fair-vnni-zen5-2026-12-04-evening",
            (FAIR_VNNI_ZEN5_EVENING_CSV,),
            FAIR_VNNI_LAUNCH_COLUMNS,
            FAIR_VNNI_CMD,
            summary=both(FAIR_VNNI_FASTEST_GEOMEANS, convergence_counts),
        ),
        Table(  # ... on a Zen 5, 2026-12-04, beside each column's fastest process
            "suite-fair-vnni-zen5-2026-12-04",
            (FAIR_VNNI_ZEN5_DEC4_CSV,),
            FAIR_VNNI_TARGET_COLUMNS,
            FAIR_VNNI_CMD,
            summary=both(FAIR_VNNI_FASTEST_GEOMEANS, convergence_counts),
        ),
        Table(  # ... on a Zen 4, 2026-12-02, beside each column's fastest process
            "suite-fair-vnni-zen4-2026-12-02",
            (FAIR_VNNI_ZEN4_DEC_CSV,),
            FAIR_VNNI_FASTEST_COLUMNS,
            FAIR_VNNI_CMD,
            summary=FAIR_VNNI_FASTEST_GEOMEANS,
        ),
        Table(  # ... its rows lost or below 90 % of peak, both tuners at 64 trials
            "suite64-vnni-zen4-2026-12-03",
            (SUITE64_ZEN4_CSV,),
            SUITE64_COLUMNS,
            "python benchmarks/suite.py --cases D1,C1D4,G4,C1D1,C3D1,G1,C3D5,C3D3 --trials 64 "
            "--batch 16 --no-equal-wall  (then --cases T4,B1,T2,T6,C2D6,C3D2,C2D2,B3, the same "
            "options, into the same CSV)",
            before=FAIR_VNNI_ZEN4_DEC_CSV,
            summary=SUITE64_GEOMEANS,
        ),
        Table(  # ... on a Zen 5, 2026-12-01
            "suite-fair-vnni-zen5-2026-12-01",
            (FAIR_VNNI_ZEN5_DEC_CSV,),
            FAIR_VNNI_COLUMNS,
            FAIR_VNNI_CMD,
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # heronlike at 64 trials against PyTorch on the Zen 5 (no MetaSchedule)
            "suite-vnni64-zen5",
            ("suite_vnni64-amd-epyc-zen5-2026-12-02.csv",),
            BUDGET_COLUMNS,
            "python benchmarks/suite.py --trials 64 --batch 16 --no-metaschedule "
            "--no-equal-wall --cases <the 37 GEMM and convolution cases>",
            summary=budget_summary,
        ),
        Table(  # ... on a Zen 4
            "suite-fair-vnni-zen4",
            (FAIR_VNNI_ZEN4_CSV,),
            FAIR_VNNI_COLUMNS,
            FAIR_VNNI_CMD,
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # ... the run before it, on a Zen 5, each kernel's samples back to back
            "suite-fair-vnni",
            (FAIR_VNNI_ZEN5_CSV,),
            FAIR_VNNI_COLUMNS,
            FAIR_VNNI_CMD,
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # the Zen 4 table's lost rows (and three won), on an Intel Xeon with AMX
            "suite-fair-vnni-xeon",
            ("suite_fair-vnni-intel-xeon-emr-lost-rows-2026-11-29.csv",),
            FAIR_VNNI_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1",
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # the same nine rows with heronlike 0.2.0 (micro-kernel order, refitted prior)
            "suite-fair-vnni-xeon-0.2",
            ("suite_fair-vnni-intel-xeon-emr-lost-rows-0.2.0-2026-11-29.csv",),
            FAIR_VNNI_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1",
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # ... and on one core (vCPU 0), every column single-threaded
            "suite-fair-vnni-xeon-1core",
            ("suite_fair-vnni-intel-xeon-emr-lost-rows-1core-0.2.0-2026-11-29.csv",),
            FAIR_VNNI_COLUMNS,
            "taskset -c 0 python benchmarks/suite.py --quick --cases "
            "G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1",
            summary=FAIR_VNNI_GEOMEANS,
        ),
        Table(  # the rows lost at 16 trials, re-run at 64 trials per tuner
            "suite-fair-vnni-64",
            ("suite_fair64-vnni-*.csv",),
            FAIR_ROOFLINE_COLUMNS,
            "python benchmarks/suite.py --cases G5,G4,C1D1,C2D5,T5,D4 --trials 64",
            summary=FAIR_GEOMEANS,
        ),
        Table(
            "prior-effect",
            ("prior_effect-*.csv",),
            PRIOR_COLUMNS,
            "python benchmarks/prior_effect.py --seeds 3",
            rows=prior_by_case,
        ),
        Table(  # the refitted prior against the one it replaced, in tunes
            "prior-refit",
            ("prior_refit-*.csv",),
            PRIOR_REFIT_COLUMNS,
            "python benchmarks/prior_effect.py --cases G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1 "
            "--seeds 3 --baseline benchmarks/priors/dlboost-2026-11-28.json",
            rows=prior_by_case,
        ),
        Table(  # the prior as the cost model's base margin, replayed on random programs
            "prior-margin-replay",
            ("prior_margin-intel-*.csv",),
            PRIOR_MARGIN_REPLAY_COLUMNS,
            "python benchmarks/prior_margin.py <records of prior_records.py --trials 160>",
            rows=margin_replay_rows,
        ),
        Table(  # the Zen 4 prior against the shipped one, replayed on random programs
            "prior-zen4-replay",
            ("prior_margin-amd-epyc-f25m17-*.csv",),
            PRIOR_ZEN4_REPLAY_COLUMNS,
            "python benchmarks/prior_records.py --trials 160 --cases "
            "B1,B3,C2D2,D2,T2,T4,T6,C2D4,C3D2,G3,C1D1,GV3 (C2D2: 128) --out rand.sqlite; "
            "python benchmarks/prior_margin.py rand.sqlite --arms margin,random "
            "--prior zen4=benchmarks/priors/dlboost-zen4-2026-12-07.json "
            "--prior zen4-write-back=benchmarks/priors/dlboost-zen4-write-back-2026-12-07.json",
            rows=margin_replay_rows,
        ),
        Table(  # the Zen 4 prior with parallel.balance held at PRIOR's, replayed likewise
            "prior-zen4-balance-replay",
            ("prior_margin_balance-held-amd-epyc-f25m17-*.csv",),
            PRIOR_ZEN4_REPLAY_COLUMNS,
            "python benchmarks/prior_margin.py rand.sqlite --arms margin "
            "--prior zen4-write-back=benchmarks/priors/dlboost-zen4-write-back-2026-12-07.json "
            "--prior zen4-balance=benchmarks/priors/dlboost-zen4-balance-2026-12-07.json  "
            "(rand.sqlite: the records of the table above)",
            rows=margin_replay_rows,
        ),
        Table(  # ... and on fresh random programs of the table's lost rows GV1, GV4 and D1
            "prior-zen4-balance-replay-lost-rows",
            ("prior_margin_balance-lost-rows-amd-epyc-f25m17-*.csv",),
            PRIOR_ZEN4_REPLAY_COLUMNS,
            "python benchmarks/prior_records.py --trials 160 --seed 7 --cases GV1,GV4,D1 "
            "--out lost.sqlite; python benchmarks/prior_margin.py lost.sqlite --arms margin,random "
            "--prior zen4-write-back=benchmarks/priors/dlboost-zen4-write-back-2026-12-07.json "
            "--prior zen4-balance=benchmarks/priors/dlboost-zen4-balance-2026-12-07.json",
            rows=margin_replay_rows,
        ),
        Table(  # the Zen 4 prior with parallel.speedup, replayed on the 12 held-out cases
            "prior-zen4-speedup-replay",
            ("prior_margin_speedup-held-amd-epyc-f25m17-*.csv",),
            PRIOR_ZEN4_REPLAY_COLUMNS,
            "python benchmarks/prior_margin.py rand.sqlite --arms margin "
            "--cases B1,B3,C2D2,D2,T2,T4,T6,C2D4,C3D2,G3,C1D1,GV3 "
            "--prior zen4-balance=benchmarks/priors/dlboost-zen4-balance-2026-12-07.json "
            "--prior zen4-speedup=benchmarks/priors/dlboost-zen4-speedup-2026-12-07.json  "
            "(rand.sqlite: the records of the tables above)",
            rows=margin_replay_rows,
        ),
        Table(  # ... and on fresh random programs of the matrix-vector products and D1
            "prior-zen4-speedup-replay-gemv",
            ("prior_margin_speedup-gemv-amd-epyc-f25m17-*.csv",),
            PRIOR_ZEN4_REPLAY_COLUMNS,
            "python benchmarks/prior_records.py --trials 160 --seed 7 --cases GV1,GV4,D1 "
            "--out lost.sqlite (the table above's); python benchmarks/prior_records.py --trials "
            "160 --seed 7 --cases GV2,GV5 --out gemv.sqlite; python benchmarks/prior_margin.py "
            "lost.sqlite gemv.sqlite --arms margin,random --cases GV1,GV2,GV4,GV5,D1 "
            "--prior zen4-balance=benchmarks/priors/dlboost-zen4-balance-2026-12-07.json "
            "--prior zen4-speedup=benchmarks/priors/dlboost-zen4-speedup-2026-12-07.json",
            rows=margin_replay_rows,
        ),
        Table(  # the same, in tunes timed side by side
            "prior-margin-tunes",
            ("prior_margin_tunes-*.csv",),
            PRIOR_MARGIN_TUNE_COLUMNS,
            "python benchmarks/prior_effect.py --cases G3,B1,C1D5,C2D1,C2D4,C3D3,D1,G1 "
            "--seeds 2 --model-alone (the second file: --seeds 4)",
            rows=prior_by_case,
        ),
        Table(  # the prior with and without the padding guards' skipped work, in tunes
            "prior-padding",
            ("prior_padding-*.csv",),
            PRIOR_PADDING_COLUMNS,
            "python benchmarks/prior_effect.py --cases C3D5,C3D3,C3D1,C2D1 --seeds 4 "
            "--baseline benchmarks/priors/dlboost-2026-11-29.json",
            rows=prior_by_case,
        ),
        Table(  # the prior of vpmaddwd spaces against the one they had before, in tunes
            "prior-pmaddwd-zen1",
            ("prior_pmaddwd-amd-epyc-f23m1-2026-12-06.csv",),
            PRIOR_REFIT_COLUMNS,
            "python benchmarks/prior_effect.py --cases B1,G3,C1D1,C2D6 --seeds 3 "
            "--baseline benchmarks/priors/dlboost-2026-12-06.json",
            rows=prior_by_case,
        ),
        Table(  # DL Boost's prior against its refit on a Zen 4 (not shipped), in tunes
            "prior-zen4-refit",
            ("prior_zen4-amd-epyc-f25m17-2026-12-07.csv",),
            PRIOR_COLUMNS,
            "python benchmarks/prior_effect.py --cases B1,B3,C2D2,D2,T2,T4,T6,C2D4,C3D2,G3,C1D1,"
            "GV3 --seeds 2 --baseline benchmarks/priors/dlboost-zen4-2026-12-07.json",
            rows=prior_by_case,
        ),
        Table(  # a register tile of at least the latency-hiding count, in tunes
            "target-options-accumulators",
            ("target_options-intel-r-xeon-r-processor-f6m207-2026-11-29.csv",),
            OPTIONS_COLUMNS,
            "python benchmarks/target_options.py --cases G1,G3,B1,C1D5,C2D1,C2D4,C3D1,C3D3,D1 "
            "--seeds 3",
            rows=options_by_case,
        ),
        Table(  # the all-guards knob on padded convolutions of 20-50 % padding, in tunes
            "target-options-all-guards",
            ("target_options-amd-epyc-f26m2-2026-12-01.csv",),
            GUARDS_OPTION_COLUMNS,
            "python benchmarks/target_options.py --options=-all-guards=0.2 "
            "--cases C3D3,C3D1,C2D5,D5,T5",
            rows=guards_by_case,
        ),
        Table(  # the guard place settled by variant trials against outer guards only, in tunes
            "target-options-variant-trials-zen1",
            ("target_options_variants-amd-epyc-f23m1-2026-12-06.csv",),
            VARIANT_COLUMNS,
            "python benchmarks/target_options.py --options=-all-guards=1 "
            "--cases C3D3,C2D5,C3D1,D5,T5",
            rows=variants_by_case,
        ),
        Table(  # A's widened copy placed by variant trials against a copy at the root only
            "target-options-widened-copy-zen1",
            ("target_options_widened_copy-amd-epyc-f23m1-2026-12-06.csv",),
            COPY_COLUMNS,
            "python benchmarks/target_options.py --options=-widen-a=root "
            "--cases B4,B1,G1,C1D1,C2D6,D4",
            rows=copies_by_case,
        ),
        Table(  # one GEMM schedule, register tiles of 1 to 16 accumulators
            "register-tiles",
            ("register_tiles-[!1]*.csv", "register_tiles-1core-*.csv"),
            REGISTER_TILE_COLUMNS,
            "python benchmarks/register_tiles.py; taskset -c 0 python benchmarks/register_tiles.py",
        ),
        Table(  # a tuned schedule (G4's, 16 trials) with its register tile changed
            "register-tiles-tuned-g4",
            (
                "register_tiles_tuned-amd-epyc-f26m2-2026-12-04.csv",
                "register_tiles_tuned-7rounds-amd-epyc-f26m2-2026-12-04.csv",
            ),
            (
                Col("case", "{case}"),
                Col("harness rounds", "{rounds}"),
                *REGISTER_TILE_COLUMNS[2:5],
                Col("G op/s", "{gops:.0f}"),
                *REGISTER_TILE_COLUMNS[5:],
            ),
            "python benchmarks/register_tiles.py --cases G4 --tiles 4x4,8x2,2x8,16x1,8x1,4x2,2x4 "
            "--from-records benchmarks/out/suite-launch-small/G4/heronlike/records.sqlite "
            "(then --tiles 4x4,8x2 --rounds 7)",
        ),
        Table(  # a tuned B1 schedule with its register tile changed, on vpmaddwd (Zen 1)
            "register-tiles-tuned-b1-zen1",
            ("register_tiles_vpmaddwd_tuned-amd-epyc-f23m1-2026-12-06.csv",),
            (
                REGISTER_TILE_COLUMNS[0],
                *REGISTER_TILE_COLUMNS[2:5],
                Col("G op/s", "{gops:.0f}"),
                *REGISTER_TILE_COLUMNS[5:],
            ),
            "python benchmarks/register_tiles.py --cases B1 --tiles 4x2,8x1,2x4,2x2,4x1,1x8 "
            "--rounds 3 --from-records <records of a B1 tune>",
        ),
        Table(  # a GEMV's streaming options against DL Boost's rules, point by point
            "gemv-stream",
            ("gemv_stream-amd-epyc-f26m2-2026-12-05.csv",),
            GEMV_STREAM_COLUMNS,
            "python benchmarks/gemv_stream.py --points 16 --point S0=8,S1=1,S2=8,R0=8,R1=32,"
            "unroll=512",
        ),
        Table(  # ... and in tunes, 16 trials, three seeds
            "gemv-stream-tuned",
            ("gemv_stream_tuned-amd-epyc-f26m2-2026-12-05.csv",),
            GEMV_STREAM_TUNED_COLUMNS,
            "python benchmarks/gemv_stream.py --tune-seeds 0,1,2",
            summary=geomean("case", "geomean", ("speedup",)),
        ),
        Table(  # ... one point each with the output placed at offsets from the vector
            "gemv-stream-alias",
            ("gemv_stream_alias-amd-epyc-f26m2-2026-12-05.csv",),
            GEMV_STREAM_ALIAS_COLUMNS,
            "python benchmarks/gemv_stream.py --cases GV2,GV5 --alias "
            "--point S0=4,S1=1,S2=16,R0=2,R1=32,unroll=512,serial=0 "
            "--point S0=8,S1=1,S2=8,R0=8,R1=32,unroll=512",
        ),
        Table(  # one GEMV tile, parallel and serial, timed in fresh processes of their own
            "process-modes",
            ("process_modes-amd-epyc-f26m2-2026-12-05.csv",),
            PROCESS_MODES_COLUMNS,
            "python benchmarks/process_modes.py",
            summary=process_modes_summary,
        ),
        Table(  # tiles of C2D2 timed in the same turns, each turn near or far
            "core-distance",
            ("core_distance-amd-epyc-f26m2-2026-12-05.csv",),
            CORE_DISTANCE_COLUMNS,
            "python benchmarks/core_distance.py",
        ),
        Table(  # C2D2's and D2's tiles: the same split walked in other orders, near and far
            "core-distance-orders",
            ("core_distance_orders-amd-epyc-f26m2-2026-12-05.csv",),
            CORE_DISTANCE_ORDER_COLUMNS,
            "python benchmarks/core_distance.py --cases C2D2,D2 --turns 1500 --point rows_2: "
            "--point rows_2_rows_outer:order@S1.v_i0=1,order@S1.v_i1=2,order@S1.v_i2=3 "
            "--point rows_2_cols_inner:order@S1.v_i0=2,order@S1.v_i1=3,order@S1.v_i2=1 "
            "(and the other four tiles' knobs, in the CSV's changes column)",
        ),
        Table(  # tunes in the default space (SplitAxisNotInnermost) and in the whole one
            "split-axis-rule",
            ("target_options_split_axis-amd-epyc-f26m2-2026-12-05.csv",),
            SPLIT_AXIS_COLUMNS,
            "python benchmarks/target_options.py --options=-split-axis-ops=0 --seeds 3 "
            "--cases C2D2,D2,T2,C2D4,C2D6,C3D6,D4,D6,C3D4,C3D2,T4,T6,S2",
            rows=split_axis_by_case,
        ),
        Table(  # the small cases again, with SplitAxisNotInnermost, every sample labelled
            "suite-split-axis",
            (SUITE_SPLIT_AXIS_CSV,),
            FAIR_VNNI_STATE_COLUMNS,
            "python benchmarks/suite.py --quick "
            "--cases C2D2,D2,T2,C2D4,C2D6,C3D6,D4,D6,C3D4,C3D2,T4,T6,S2",
            summary=both(
                fair_geomeans(FAIR_VNNI_STATE_SPEEDUPS),
                peak_counts,
            ),
        ),
        Table(  # suite rows, every harness sample labelled near or far
            "suite-core-state",
            (SUITE_CORE_STATE_CSV,),
            SUITE_CORE_STATE_COLUMNS,
            SUITE_CORE_STATE_CMD,
        ),
        Table(  # the same schedule on the vpmaddwd intrinsic of a CPU without VNNI
            "register-tiles-vpmaddwd-zen3",
            ("register_tiles_vpmaddwd-amd-epyc-f25m1-2026-12-02.csv",),
            REGISTER_TILE_COLUMNS,
            "python benchmarks/register_tiles.py --tiles 1x8,2x4,4x2,8x1,2x2,4x1,1x4",
        ),
        Table(  # pre-widened A (the default) against -widen-a=0, in tunes of AVX2 kernels
            "target-options-widen-a",
            ("target_options-amd-epyc-f26m2-2026-12-02.csv",),
            OPTIONS_COLUMNS[:5],
            'python benchmarks/target_options.py --target "llvm -mcpu=znver3" '
            "--options=-widen-a=0 --cases G1,B1,C2D1,C2D5,C1D3,GV5",
            rows=options_by_case,
        ),
        Table(  # one G1 schedule, A pre-widened or widened in the call, AVX2 and AVX-512BW code
            "register-tiles-widen-a-zen5",
            (
                "register_tiles_vpmaddwd_widen_a-znver3-amd-epyc-f26m2-2026-12-02.csv",
                "register_tiles_vpmaddwd_widen_a-skylake-avx512-amd-epyc-f26m2-2026-12-02.csv",
            ),
            WIDEN_A_COLUMNS,
            'python benchmarks/register_tiles.py --target "llvm -mcpu=znver3" '
            "--tiles 2x4,1x8,4x2,8x1,2x2 --compare-widen-a (and -mcpu=skylake-avx512)",
            rows=widen_a_by_tile,
            summary=geomean("mcpu", "geomean over both", ("speedup",)),
        ),
        Table(  # the same comparison on a real Zen 3 (AVX2 only), PyTorch beside it
            "register-tiles-widen-a-zen3",
            ("register_tiles_vpmaddwd_widen_a-amd-epyc-f25m1-2026-12-02.csv",),
            WIDEN_A_COLUMNS + (Col("pre-widened vs PyTorch", "{vs_pytorch:.2f}"),),
            "python benchmarks/register_tiles.py --tiles 2x4,1x8,4x2,8x1,2x2 --compare-widen-a",
            rows=widen_a_by_tile,
            summary=geomean("mcpu", "geomean", ("speedup",)),
        ),
        Table(  # the AVX2 int8 micro-kernel four ways (widening in the loop or at packing)
            "pmaddwd-loops-zen3",
            ("pmaddwd_loops-amd-epyc-f25m1-2026-12-02.csv",),
            PMADDWD_LOOP_COLUMNS,
            "taskset -c 0 python benchmarks/pmaddwd_loops.py --tiles 2x4,1x8,4x2,8x1,3x4 --csv …",
        ),
        Table(
            "loop-order",
            ("loop_order-*.csv",),
            LOOP_ORDER_COLUMNS,
            "taskset -c 0 python benchmarks/loop_order.py --cases G1,C2D1,B1,C1D3,C3D3,GV5",
            summary=geomean("case", "geomean over the cases", ("geomean_speedup",)),
        ),
        Table(
            "loop-order-float32",
            ("loop_order_float32-*.csv",),
            LOOP_ORDER_COLUMNS,
            "taskset -c 0 python benchmarks/loop_order.py --dtype float32 --cases G3,B1,C2D3",
            summary=geomean("case", "geomean over the cases", ("geomean_speedup",)),
        ),
        Table(
            "padding-skip",
            (PADDING_SKIP_ZEN5_CSV,),
            PADDING_SKIP_VERSION_COLUMNS,
            "python benchmarks/padding_skip.py",
        ),
        Table(  # ... all guards as branch-free versions, on the Emerald Rapids Xeon
            "padding-skip-versions-xeon-emr-2026-12-06",
            ("padding_skip-intel-r-xeon-r-processor-f6m207-2026-12-06.csv",),
            PADDING_SKIP_SEED_COLUMNS,
            "python benchmarks/padding_skip.py --rounds 8; then --seed 1 --cases C2D1,C3D1,D1,C3D3",
        ),
        Table(  # ... the two padded 3-D convolutions the Intel table loses, on that Xeon
            "padding-skip-xeon-f6m167",
            ("padding_skip-intel-r-xeon-r-processor-f6m167-2026-12-01.csv",),
            PADDING_SKIP_PICK_COLUMNS,
            "python benchmarks/padding_skip.py --cases C3D5,C3D3",
        ),
        Table(
            "padding-skip-float32",
            ("padding_skip_float32-amd-epyc-f26m2-2026-11-28.csv",),
            PADDING_SKIP_PICK_COLUMNS,
            "python benchmarks/padding_skip.py --dtype float32",
        ),
        Table(
            "fused-placement",
            ("fused_placement-*.csv",),
            FUSED_PLACEMENT_COLUMNS,
            "python benchmarks/fused_placement.py",
        ),
        Table(
            "store-spread-model",
            ("store_spread-*.csv",),
            STORE_SPREAD_MODEL_COLUMNS,
            "python benchmarks/store_spread.py",
            where=lambda r: r["part"] == "c",
        ),
        Table(
            "store-spread-model-lines",
            ("store_spread_model-*.csv",),
            STORE_SPREAD_MODEL_COLUMNS,
            "python benchmarks/store_spread.py --part c",
        ),
        Table(
            "store-spread-kernels",
            ("store_spread-*.csv",),
            STORE_SPREAD_KERNEL_COLUMNS,
            "python benchmarks/store_spread.py",
            where=lambda r: str(r["part"]).startswith("tvm"),
            rows=store_spread_kernels,
        ),
        Table(
            "pytorch-sharing",
            ("pytorch_sharing-*.csv",),
            SHARING_COLUMNS,
            "python benchmarks/pytorch_sharing.py",
            summary=geomean(
                "case",
                "geomean",
                (
                    "speedup_vs_pytorch_own",
                    "speedup_vs_pytorch_shared",
                    "heronlike_shared_vs_own",
                    "pytorch_shared_vs_own",
                ),
            ),
        ),
        Table(
            "pick-rule",
            ("pick_rule-*.csv",),
            PICK_RULE_COLUMNS,
            "python benchmarks/pick_rule.py",
            summary=pick_rule_summary,
        ),
        Table(
            "measure-rounds",
            ("measure_rounds-*.csv",),
            ROUNDS_COLUMNS,
            "python benchmarks/measure_rounds.py  (run twice; the first run had no top-k columns)",
            rows=rounds_by_case,
        ),
        Table(
            "suite-seeds",
            ("suite_seeds-*.csv",),
            SEEDS_COLUMNS,
            "for s in 1 2; do python benchmarks/suite.py --cases C1D1,D3,GV3,GV4,C3D1,C3D3 "
            "--quick --seed $s --out OUT/s$s; done  (seed 0: an earlier run of the fair table)",
            rows=seeds_by_case,
        ),
        Table(  # the same for the rows the re-run (fused placement, roofline) lost
            "suite-seeds-rerun",
            ("suite_reseeds-*.csv",),
            SEEDS_COLUMNS,
            "for s in 1 2; do python benchmarks/suite.py --cases C1D4,C2D2,GV4,G4,C3D5,D3 "
            "--quick --seed $s --out OUT/s$s; done  (seed 0: an earlier run of the fair table)",
            rows=seeds_by_case,
        ),
        Table(  # the same on a CPU without VNNI (both tuners on vpmaddwd)
            "suite-fair",
            (FAIR_GENERAL_ZEN3_NOV_CSV,),
            FAIR_COLUMNS,
            "python benchmarks/suite.py --quick  (then --table --quick for the rest)",
            summary=FAIR_GEOMEANS,
        ),
        Table(  # ... again on a Zen 3, with heronlike given MetaSchedule's search time
            "suite-fair-general-zen3-2026-12-02",
            (FAIR_GENERAL_ZEN3_DEC_CSV,),
            FAIR_VNNI_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G3,G4,B1,T5,…  "
            "(--table --quick runs the rest)",
            summary=FAIR_GENERAL_GEOMEANS,
        ),
        Table(  # ... and with pre-widened A, the whole table ...
            "suite-fair-general-zen3-widen-a",
            (FAIR_GENERAL_ZEN3_WIDEN_A_CSV,),
            FAIR_VNNI_COLUMNS,
            "python benchmarks/suite.py --table --quick  (stopped after 17 cases; then "
            "--quick --cases C2D3,C2D4,C2D5,C3D2,C3D5,D1,D3,T1,T3,T5,GV5)",
            summary=FAIR_GENERAL_GEOMEANS,
        ),
        Table(  # ... and case by case against the run before it
            "suite-fair-general-zen3-widen-a-vs-before",
            (FAIR_GENERAL_ZEN3_WIDEN_A_CSV,),
            WIDEN_A_FAIR_COLUMNS,
            "python benchmarks/suite.py --table --quick  (before: the table below)",
            before=FAIR_GENERAL_ZEN3_DEC_CSV,
            summary=WIDEN_A_FAIR_GEOMEANS,
        ),
        Table(  # the quick cases and the VNNI machines' lost rows on a Zen 1 (AVX2 only)
            "suite-fair-general-zen1-2026-12-06",
            (FAIR_GENERAL_ZEN1_CSV,),
            FAIR_VNNI_HARNESS_STATE_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G3,B1,B4,C1D1,C1D3,C1D5,C2D1,C2D6,"
            "C3D2,C3D3,C3D5,D1,D4,T1,T4,GV5,S3",
            summary=FAIR_GENERAL_ZEN1_SUMMARY,
        ),
        Table(  # the Zen 1's padded 3-D convolutions again, with variant trials
            "suite-fair-general-variants-zen1-2026-12-06",
            ("suite_fair-general-variants-amd-epyc-zen1-2026-12-06.csv",),
            FAIR_VNNI_HARNESS_STATE_COLUMNS,
            "python benchmarks/suite.py --quick --cases C3D3,C3D5",
        ),
        Table(  # the same two rows against PyTorch at two seeds, with padding.skipped
            "suite-general-padded-seeds-zen1-2026-12-06",
            ("suite_general-padded-seed*-amd-epyc-zen1-2026-12-06.csv",),
            PYTORCH_SEEDS_TRIALS_COLUMNS,
            "python benchmarks/suite.py --quick --cases C3D3,C3D5 --no-metaschedule --seed S "
            "(S = 0, 1)",
        ),
        Table(  # the products the widened copy concerns, against PyTorch, with the knob
            "suite-general-copy-zen1-2026-12-06",
            ("suite_general-copy-amd-epyc-zen1-2026-12-06.csv",),
            PYTORCH_SEEDS_TRIALS_COLUMNS,
            "python benchmarks/suite.py --quick --cases B4,B1,G3,C1D1,C2D6 --no-metaschedule",
        ),
        Table(  # the products below 90 % in the Zen 1's table, with the prior of vpmaddwd spaces
            "suite-general-prior-zen1-2026-12-06",
            ("suite_general-prior-amd-epyc-zen1-2026-12-06.csv",),
            PYTORCH_SEEDS_TRIALS_COLUMNS,
            "python benchmarks/suite.py --quick --cases B1,G3,C1D1,C2D6 --no-metaschedule",
        ),
        Table(  # the GEMM and convolution rows with the peak read in the harness's turns
            "suite-peak-turns-zen1-2026-12-07",
            ("suite_general-peak-turns-amd-epyc-zen1-2026-12-07.csv",),
            PEAK_TURNS_COLUMNS,
            "python benchmarks/suite.py --quick --cases G1,G3,B1,B4,C1D1,C1D3,C1D5,C2D1,C2D6,"
            "C3D2,C3D3,C3D5,D1,D4,T1,T4 --no-metaschedule",
            summary=peak_turn_counts,
        ),
        Table(  # the convolutions on a Zen 2 (AVX2 only), the padding guards back
            "suite-fair-general-zen2",
            (FAIR_GENERAL_ZEN2_CSV,),
            FAIR_VNNI_COLUMNS,
            "python benchmarks/suite.py --quick --cases C3D5,D3,C3D2,…  (24 convolutions; "
            "then --redo C2D4,C2D6,C3D2,C3D4,C3D6,D4,D6 after the strided copy)",
            summary=FAIR_GENERAL_GEOMEANS,
        ),
        Table(  # ... its strided 1 x 1 rows before and after the strided copy
            "suite-fair-general-zen2-strided-copy",
            (FAIR_GENERAL_ZEN2_CSV,),
            WIDEN_A_FAIR_COLUMNS,
            "python benchmarks/suite.py --quick --redo C2D4,C2D6,C3D2,C3D4,C3D6,D4,D6  (before: "
            "the same rows of the first run)",
            before=FAIR_GENERAL_ZEN2_FULL_COPY_CSV,
            summary=WIDEN_A_FAIR_GEOMEANS,
        ),
        Table(  # ... and case by case against the Zen 3 table of 2026-12-02
            "suite-fair-general-zen2-vs-zen3",
            (FAIR_GENERAL_ZEN2_CSV,),
            ZEN2_VS_ZEN3_COLUMNS,
            "python benchmarks/suite.py --quick  (Zen 3: the table below)",
            before=FAIR_GENERAL_ZEN3_WIDEN_A_CSV,
            summary=ZEN2_VS_ZEN3_GEOMEANS,
        ),
        # ---- llvm
        Table(
            "llvm-float32",
            ("llvm_float32-amd-epyc-2026-11-23.csv", "llvm_float32-quick-*.csv"),
            LLVM_COLUMNS + (Col("valid heronlike / MS", "{heronlike_valid} / {ms_valid}"),),
            LLVM_CMD + "  (--quick --cases layer_norm,conv2d_bias_relu,depthwise)",
            machine=LLVM_MACHINE,
        ),
        # ---- TensorCore
        Table(
            "tensorcore-h100",
            ("tensorcore_h100_80gb_hbm3.csv",),
            TC_COLUMNS,
            TC_CMD,
            summary=TC_GEOMEANS,
            machine=TC_MACHINE,
        ),
        Table(
            "tensorcore-h200",
            ("tensorcore_h200.csv",),
            TC_COLUMNS + (Col("best program", "{program}"),),
            TC_CMD,
            summary=TC_GEOMEANS,
            machine=TC_MACHINE,
        ),
        Table(
            "tensorcore-compile",
            ("tensorcore_compile.csv", "tensorcore_compile_c1_seed*.csv"),
            (
                Col("case", "{case}"),
                Col("file", "{_file}"),
                Col("built without spills", "{ok} of {samples}"),
                Col("%", "{ok_pct:.1f}"),
                Col("spills", "{spill}"),
                Col("ptxas level 10", "{ptxas_10}"),
                Col("registers min / median / max", "{regs_min} / {regs_median:g} / {regs_max}"),
                Col("machine", "{cpu}"),
                Col("date", "{date:.10}"),
            ),
            "python benchmarks/tensorcore.py count [--cases C1 --samples 300 --seed 1]",
            machine=("{cpu}, nvcc {nvcc_version:g}, TVM {tvm_version}",),
        ),
        # ---- AMX
        Table(
            "amx-compile",
            ("amx_count-*.csv",),
            (
                Col("case", "{case}"),
                Col("dtype", "{dtype}"),
                Col("shape", "{params}"),
                Col("valid (CSP, built, tile assembly)", "{valid} of {samples}"),
                Col("%", "{valid_pct:.1f}"),
                Col("micro-kernel shapes sampled (m×n: count)", "{shapes}"),
                Col("refused", lambda r: "" if r["samples"] else _refusal(r.get("failures"))),
            ),
            "python benchmarks/amx.py count --cases G1,G3,B1,C1D1,C2D1,C2D2,C3D1,D1,S1 "
            "--samples 64 --dtypes int8,bfloat16",
            machine=("{cpu_model} ({cpu_signature}), -mcpu=sapphirerapids, TVM {tvm_version}",),
        ),
        Table(
            "amx-compare",
            ("amx_compare-*.csv",),
            AMX_COLUMNS,
            AMX_CMD,
            summary=AMX_GEOMEANS,
            machine=AMX_MACHINE,
        ),
        # ---- VTA
        Table(
            "vta-compare",
            ("vta_compare.csv",),
            VTA_COLUMNS,
            "python benchmarks/vta_compare.py",
            rows=geomean_row_bold,
            machine=VTA_MACHINE,
        ),
        Table(
            "vta-sensitivity",
            ("vta_sensitivity.csv",),
            (
                Col("case", "{case}"),
                Col("constant settings", "{variants}"),
                Col("top schedules ranked", "{n_schedules}"),
                Col("Kendall τ, median", "{median:.2f}"),
                Col("lowest τ (setting)", "{lowest:.2f} ({lowest_variant})"),
                Col("lowest τ, one constant alone", "{alone[kendall_tau]:.2f} ({alone[variant]})"),
                Col("best schedule stays best", "{best_kept} of {variants}"),
            ),
            "python benchmarks/vta_sensitivity.py",
            rows=sensitivity,
            machine=VTA_MACHINE,
        ),
        # ---- search efficiency
        Table(
            "search-zen4",
            ("search_efficiency_runs.csv",),
            (
                Col("explorer", "{label}"),
                Col("GEMM @200", "{gemm}"),
                Col("re-measured", "{gemm remeasured}"),
                Col("BMM @200", "{bmm}"),
                Col("re-measured", "{bmm remeasured}"),
                Col("explorer share (GEMM / BMM)", "{share}"),
            ),
            "python benchmarks/search_efficiency.py",
            rows=run_medians,
        ),
        Table(
            "search-xeon-c2d",
            ("search_efficiency-intel-xeon/search_efficiency_summary.csv",),
            EXPLORER_SUMMARY_COLUMNS,
            "python benchmarks/search_efficiency.py --ops c2d --explorers cga,cga1,rand,random "
            "--seeds 8",
            where=lambda r: r["op"] == "c2d",
            rows=explorer_summary,
        ),
        Table(
            "search-xeon-gemm",
            ("search_efficiency-intel-xeon/search_efficiency_summary.csv",),
            EXPLORER_SUMMARY_COLUMNS,
            "python benchmarks/search_efficiency.py --ops gemm --explorers cga,cga1,rand "
            "--seeds 6 --out benchmarks/results/search_efficiency-intel-xeon",
            where=lambda r: r["op"] == "gemm",
            rows=explorer_summary,
        ),
        Table(
            "search-cpu-surrogate",
            tuple(
                f"search_efficiency_sim-{space}amd-epyc-2026-11-23_summary.csv"
                for space in ("", "t200-", "gemm512x512x512-t200-", "c2d*-t200-", "bmm*-t200-")
            ),
            (
                Col("space (float32, `llvm`)", "{space}"),
                Col("trials (RAND's)", "{budget} ({rand budget})"),
                Col("seeds", "{seeds}"),
                Col("CGA", ci("cga")),
                Col("CGA-1", ci("cga1")),
                Col("RAND", ci("rand")),
                Col("OpEvo", "{opevo[mean]:.1f}"),
                Col("FlexTensor", "{flextensor[mean]:.1f}"),
                Col("CGA − CGA-1", ci("cga - cga1", signed=True)),
                Col("CGA − RAND", ci("cga - rand", signed=True)),
            ),
            SE_SIM_CMD,
            rows=surrogate_row,
            machine=("surrogate simulated on {cpu_model}",),
        ),
        Table(
            "search-tc-surrogate",
            tuple(SE_TC.format(space, "summary") for space in SE_TC_SPACES),
            (
                Col("space", "{space}"),
                Col("CGA@200", "{cga[mean]!m:.3g}"),
                Col("CGA-1@200", "{cga1[mean]!m:.3g}"),
                Col("RAND@600", "{rand[mean]!m:.3g}"),
                Col("CGA − CGA-1", tflops_diff("cga - cga1")),
                Col("CGA@200 − RAND@600", tflops_diff("cga - rand")),
            ),
            SE_SIM_CMD + ' --sim-target "cuda -tensorcore -arch=sm_90"',
            rows=surrogate_row,
            machine=("surrogate simulated on {cpu_model}",),
        ),
        Table(
            "search-tc-hardware",
            tuple(SE_TC.format(space, "hardware") for space in SE_TC_SPACES),
            (
                Col("space", "{space}"),
                Col("CGA − CGA-1", tflops_diff("cga - cga1")),
                Col("CGA@200 − RAND@600", tflops_diff("cga - rand")),
            ),
            "python benchmarks/search_confirm.py bundle|report",
            rows=paired_row,
            machine=("{device}",),
        ),
        Table(
            "search-tc-fig12",
            tuple(
                f"search_efficiency_sim-{space}-cuda-tc-t1000-h100-80gb-hbm3-2026-11-23_{kind}.csv"
                for space in ("gemm1024x1024x1024", "c2d1x56x56x64x64x1x1x1x0x1")
                for kind in ("summary", "hardware")
            ),
            (
                Col("space", "{space}"),
                Col("CGA", "{cga[mean]!m:.3g}"),
                Col("CRAND", "{random[mean]!m:.3g}"),
                Col("GA", "{ga[mean]!m:.3g}"),
                Col("SA", "{sa[mean]!m:.3g}"),
                Col("CGA − CRAND", tflops_diff("cga - random")),
                Col("CGA − GA", tflops_diff("cga - ga")),
                Col("CGA − SA", tflops_diff("cga - sa")),
            ),
            SE_SIM_CMD + " --explorers cga,random,sa,ga --trials 1000; search_confirm.py",
            rows=paired_row,
            machine=("{device}", "surrogate simulated on {cpu_model}"),
        ),
        # ---- space sizes, kill -9
        Table(
            "space-sizes",
            ("space_sizes.csv",),
            (
                Col("operator", "{operator}"),
                Col("target", "`{target}`"),
                Col("dtype", "{dtype}"),
                Col("variables", "{variables}"),
                Col("constraints", "{constraints}"),
                Col(
                    "knobs (split / order / categorical / other)",
                    "{knobs} ({split_knobs} / {order_knobs} / {categorical_knobs} / {other_knobs})",
                ),
                Col("log10 valid assignments", "{log10_valid:.1f}"),
                Col(
                    "Heron's Table 5 variables / constraints",
                    "{heron_variables} / {heron_constraints}",
                ),
            ),  # fmt: skip
            "python benchmarks/space_sizes.py",
            machine=("{_comment}",),
            date=(),  # in the comment
        ),
        Table(
            "kill-resume",
            ("kill_resume.csv",),
            (
                Col("kills", "{kills}"),
                Col("trials committed at each kill", "{at}"),
                Col("trials lost", "{lost_total}"),
                Col("most in flight", "{in_flight}"),
                Col("kills inside a batch", "{mid_batch} of {kills}"),
                Col("budget (batch)", "{trials} ({batch})"),
                Col("final run complete", "{final_ok}"),
            ),
            "python benchmarks/kill_resume.py --kills 10 --trials 64",
            rows=kill_summary,
        ),
    ]
}


# ------------------------------------------------------------------------------------------------
# the files


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def rebuild(doc: Path) -> tuple[str, str, list[str]]:
    """``doc``'s text, the same with every table regenerated, and the names of its tables."""
    text = doc.read_text("utf-8")
    names: list[str] = []

    def replace(m: re.Match) -> str:
        name = m["name"]
        if m["end"] != name:
            raise TableError(f"{doc.name}: BEGIN TABLE {name} closed by END TABLE {m['end']}")
        if name not in TABLES:
            raise TableError(
                f"{doc.name}: unknown table {name!r} (registered: {', '.join(TABLES)})"
            )
        names.append(name)
        return f"<!-- BEGIN TABLE {name} -->\n{render(TABLES[name], doc)}<!-- END TABLE {name} -->"

    new = MARKERS.sub(replace, text)
    opened = len(re.findall(r"<!-- BEGIN TABLE ", text))
    if opened != len(names):
        raise TableError(f"{doc.name}: a BEGIN TABLE marker without its END TABLE marker")
    return text, new, names


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if a table would change")
    ap.add_argument("--list", action="store_true", help="list the registered tables")
    args = ap.parse_args(argv)
    if args.list:
        for t in TABLES.values():
            found = ", ".join(str(p.relative_to(RESULTS)) for p in t.paths()) or "(no file yet)"
            print(f"{t.name}: {', '.join(t.files)} -> {found}")
        return 0
    stale, placed = [], set()
    try:
        for doc in documents():
            old, new, names = rebuild(doc)
            placed.update(names)
            if new == old:
                continue
            rel = doc.relative_to(REPO).as_posix()
            stale.append(rel)
            if args.check:
                diff = difflib.unified_diff(
                    old.splitlines(True), new.splitlines(True), rel, rel + " (rebuilt)"
                )
                sys.stdout.writelines(diff)
            else:
                doc.write_text(new, "utf-8")
    except TableError as exc:
        print(f"make_results: {exc}", file=sys.stderr)
        return 2
    for name in sorted(TABLES.keys() - placed):
        print(f"make_results: table {name!r} is registered but placed in no document")
    if args.check and stale:
        print(f"make_results: out of date: {', '.join(stale)}; run python docs/make_results.py")
        return 1
    for rel in stale:
        print(f"rewrote {rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
