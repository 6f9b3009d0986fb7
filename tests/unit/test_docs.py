"""The README stays a first read and the docs stay true to the tree (issue #59): the README
within 15,000 characters with the two set-up commands as they are checked, every relative link
of the README, the changelog and docs/ leading to a file, every doc page listed in the README,
and every module docs/architecture.md names still there, so a rename that forgets the docs
fails here rather than misleading the next engineer."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
README_MAX_CHARS = 15_000
SETUP_COMMANDS = (
    "python3 -m venv .venv && .venv/bin/pip install -e '.[train]' && "
    ".venv/bin/neurotui run --preset vit-tiny-cpu",
    "bash .ci/run",
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
MODULE = re.compile(r"(?<![\w.])((?:[\w-]+/)*[\w-]+\.(?:py|c|pyi|md|toml|tcss))\b")


def pages() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", ROOT / "tests" / "bench" / "README.md",
            *sorted(DOCS.glob("*.md"))]


def test_the_readme_is_a_first_read() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text) <= README_MAX_CHARS, len(text)
    for command in SETUP_COMMANDS:
        assert f"```bash\n{command}\n```" in text, command


def test_every_relative_link_leads_to_a_file() -> None:
    broken = []
    for page in pages():
        for target in LINK.findall(page.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:", "#")):
                continue
            if not (page.parent / target.split("#")[0]).exists():
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_the_readme_lists_every_doc_page() -> None:
    listed = set(LINK.findall(README.read_text(encoding="utf-8")))
    unlisted = [page.name for page in sorted(DOCS.glob("*.md"))
                if f"docs/{page.name}" not in listed]
    assert unlisted == []


def named_file_exists(name: str) -> bool:
    """`name` as the docs write it: from the repository root, from the package, or by its
    tail anywhere in the package or the tests (`logfollow.py`, `supervisor/spool.py`)."""
    if (ROOT / name).exists() or (ROOT / "neurotui" / name).exists():
        return True
    tail = "/" + name
    return any(str(path).endswith(tail)
               for folder in ("neurotui", "tests", "runner") for path in (ROOT / folder).rglob("*"))


def test_the_architecture_names_modules_that_exist() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    names = set(MODULE.findall(text))
    assert len(names) > 40  # the step's path and the glossary name the modules they describe
    missing = sorted(name for name in names if not named_file_exists(name))
    assert missing == []


def test_the_architecture_has_a_glossary() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    glossary = text.split("\n## Glossary\n", 1)[1]
    terms = re.findall(r"^- \*\*(.+?)\*\* — ", glossary, flags=re.M)
    for word in ("a look", "a take", "placed", "held", "told", "the floor", "the spool",
                 "the flood gate", "the keeper", "the cache", "adopt", "attach", "a stand-in"):
        assert any(word in term for term in terms), word
