"""The README and docs/: length, quick start, links, and tables generated from their CSVs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
DOCS = [README, *sorted((REPO / "docs").glob("*.md"))]
MAX_README_LINES = 250

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks and inline code (links there are not links)."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", CODE_SPAN.sub(lambda m: m[0].strip("`"), heading).lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text("utf-8"))
    return {_slug(m[1].strip()) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _links(path: Path) -> list[str]:
    return [
        target
        for target in LINK.findall(_prose(path.read_text("utf-8")))
        if not re.match(r"[a-z][a-z0-9+.-]*:", target)  # http:, https:, mailto: ...
    ]


def test_readme_is_at_most_250_lines():
    lines = README.read_text("utf-8").count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines (at most {MAX_README_LINES})"


def test_readme_starts_with_the_two_command_quick_start():
    text = README.read_text("utf-8")
    first_section = re.search(r"^## (.+)$", text, re.M)
    assert first_section and first_section[1].strip() == "Quick start", "the first section"
    assert text[: first_section.start()].strip().startswith("# "), "only a title before it"
    body = text[first_section.end() :].split("\n## ", 1)[0]
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", body, re.S | re.M)
    assert len(blocks) == 1, "one code block in the quick start"
    commands = [line.strip() for line in blocks[0].splitlines() if line.strip()]
    assert len(commands) == 2, f"exactly two commands, got {commands}"

    # one of them is the test command CI runs: .ci/run calls it, and the Makefile defines it
    ci = (REPO / ".ci" / "run").read_text("utf-8")
    ci_commands = [c for c in commands if re.search(rf"^\s*{re.escape(c)}\s*$", ci, re.M)]
    assert ci_commands, f".ci/run runs none of the quick start's commands {commands}"
    for command in commands:
        target = re.fullmatch(r"make (\S+)", command)
        if target:
            makefile = (REPO / "Makefile").read_text("utf-8")
            assert re.search(rf"^{re.escape(target[1])}:", makefile, re.M), command
    make = re.fullmatch(r"make (\S+)", ci_commands[0])
    if make:
        assert any("pytest" in line for line in _make_recipe(make[1])), f"{make[0]} runs pytest"


def _make_recipe(target: str) -> list[str]:
    text = (REPO / "Makefile").read_text("utf-8")
    m = re.search(rf"^{re.escape(target)}:.*\n((?:\t.*\n)+)", text, re.M)
    assert m, f"no recipe for make {target}"
    return m[1].splitlines()


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_relative_links_resolve(doc: Path):
    broken = []
    for target in _links(doc):
        path, _, anchor = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no file {dest.relative_to(REPO)}")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append(f"{target}: no heading #{anchor} in {dest.relative_to(REPO)}")
    assert not broken, f"{doc.relative_to(REPO)}: " + "; ".join(broken)


def test_slug_matches_github():
    assert _slug("Records survive `kill -9`") == "records-survive-kill--9"
    assert _slug("DL Boost (AVX512-VNNI)") == "dl-boost-avx512-vnni"
    assert _slug("`llvm`, `x86`") == "llvm-x86"


def test_results_tables_match_their_csvs():
    """docs/make_results.py --check: every generated table rebuilds byte-identical."""
    run = subprocess.run(
        [sys.executable, str(REPO / "docs" / "make_results.py"), "--check"],
        capture_output=True,
        text=True,
        encoding="utf-8",
        cwd=REPO,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
