"""The documentation's own rules: every internal link resolves, no page outgrows a reader, and no
file of the repository points at a tracker its reader cannot see.

- a Markdown link to a repository path (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`)
  names a file that exists, and an anchor names a heading of that page (GitHub's slugs);
- a `docs/...` path written in code, configs or docs names a file that exists;
- README.md is at most 12 KB and every page under docs/ at most 40 KB;
- no tracked text file refers to a numbered ticket (the word issue or ticket followed by a number,
  or a number after a hash in brackets): the reason for a choice is written where the choice is.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEXT_SUFFIXES = {".md", ".py", ".yaml", ".yml", ".toml", ".ipynb", ".cfg", ".txt", ".sh"}
README_LIMIT = 12 * 1024
PAGE_LIMIT = 40 * 1024
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")
# spelled in pieces so that this file does not match itself
TICKET = re.compile("|".join([r"\b[Ii]ssues?\s+#?\d+", r"\(#\d+\)", r"\b[Tt]ickets?\s+#?\d+"]))


def tracked(suffixes: set[str]) -> list[Path]:
    out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.splitlines() if Path(p).suffix in suffixes and (ROOT / p).is_file()]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: its text lowercased, punctuation dropped, spaces -> '-'."""
    text = re.sub(r"`|\*\*|\*", "", heading.strip()).lower()
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.*)$", text, re.M)}


def broken_links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    broken = []
    for match in LINK.finditer(text):
        target = match.group(1) or match.group(2)
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no such file)")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no heading #{anchor})")
    return broken


def test_markdown_links_resolve():
    pages = tracked({".md"})
    assert any(p.name == "README.md" and p.parent == ROOT for p in pages)
    broken = {str(p.relative_to(ROOT)): b for p in pages if (b := broken_links(p))}
    assert not broken, broken


def test_docs_paths_named_anywhere_exist():
    missing = []
    for file in tracked(TEXT_SUFFIXES):
        for match in re.finditer(r"\bdocs/[\w./-]*\w", file.read_text(encoding="utf-8", errors="replace")):
            if not (ROOT / match.group(0)).exists():
                missing.append(f"{file.relative_to(ROOT)}: {match.group(0)}")
    assert not missing, missing


def test_pages_stay_readable():
    assert (ROOT / "README.md").stat().st_size <= README_LIMIT
    large = {
        str(p.relative_to(ROOT)): p.stat().st_size
        for p in (ROOT / "docs").rglob("*.md")
        if p.stat().st_size > PAGE_LIMIT
    }
    assert not large, large


def test_no_ticket_numbers():
    found = []
    for file in tracked(TEXT_SUFFIXES):
        for n, line in enumerate(file.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if TICKET.search(line):
                found.append(f"{file.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "\n".join(found)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("## `model:`", "model"),
        ("## launch/make_data.py", "launchmake_datapy"),
        ("## 7. Reward and training (paper, §4)", "7-reward-and-training-paper-4"),
        ("### The split placement (`mesh.rollout_devices`)", "the-split-placement-meshrollout_devices"),
    ],
)
def test_slugs_follow_github(text, expected):
    assert slug(text.lstrip("#").strip()) == expected
