"""Releases: semantic versioning, the package's version is the CHANGELOG's newest release, and every breaking
change names its migration."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RELEASE = re.compile(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", re.M)


def releases(changelog: str) -> list[tuple[str, str]]:
    """Each release section's heading, newest first: ``## <version> (<date>)``, after ``## Unreleased``."""
    return [(m[1], m[2]) for m in RELEASE.finditer(changelog)]


def breaking_entries(changelog: str) -> list[str]:
    """Every entry (``#### <title>`` and its text) under a ``### Breaking`` heading of any release."""
    entries = []
    for group in re.split(r"(?m)^### ", changelog)[1:]:
        title, _, text = group.partition("\n")
        if title.strip() == "Breaking":
            entries += re.split(r"(?m)^#### ", text.split("\n## ", 1)[0])[1:]
    return entries


def test_the_package_version_is_the_newest_release_in_the_changelog() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert changelog.index("## Unreleased") < changelog.index(f"## {version} (")
    newest = releases(changelog)[0]
    assert newest[0] == version
    dates = [date for _, date in releases(changelog)]
    assert dates == sorted(dates, reverse=True)


def test_every_release_groups_its_entries_and_every_breaking_entry_names_its_migration() -> None:
    changelog = (REPO / "CHANGELOG.md").read_text()
    for release in re.split(r"(?m)^## ", changelog)[2:]:  # past the title and "Unreleased"
        groups = re.findall(r"(?m)^### (.*)$", release)
        assert groups and set(groups) <= {"Breaking", "Added", "Changed", "Fixed"}, (release.split("\n")[0], groups)
    entries = breaking_entries(changelog)
    assert entries
    assert [e.split("\n")[0] for e in entries if "Migration:" not in e] == []


def test_the_versioning_policy_is_stated_where_users_read() -> None:
    for page in ("CHANGELOG.md", "docs/library-guide.md"):
        text = " ".join((REPO / page).read_text().split())
        assert "semantic versioning" in text and "While the version is 0.x, a minor release" in text, page
