"""Writing a benchmark's rows to a CSV file: the one place the benchmarks do it."""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def write_rows(
    path: Path | str,
    rows: Iterable[Mapping[str, Any]],
    fieldnames: Sequence[str] | None = None,
) -> Path:
    """Write ``rows`` (one mapping per CSV row) to ``path`` and return the path.

    The header is ``fieldnames`` (keys of a row not among them are left out), else every key
    of the rows in the order first seen. A ``None`` value or a missing key is an empty cell.
    The parent folder is made if needed, and the file is written to a temporary name and
    renamed, so a killed benchmark never leaves half a file.

    Raises:
        ValueError: no ``fieldnames`` and no rows (no header to write).
    """
    rows = list(rows)
    if fieldnames is None:
        fieldnames = list(dict.fromkeys(k for r in rows for k in r))
    if not fieldnames:
        raise ValueError(f"no rows and no fieldnames to write to {path}")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(fieldnames), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: "" if row.get(k) is None else row[k] for k in fieldnames})
    os.replace(tmp, path)
    return path
