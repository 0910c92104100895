"""The library guide's table of model sources has a row for every source the library takes, named by its cdk.json key."""

from __future__ import annotations

import dataclasses
import typing
from pathlib import Path

from hyperwarm.caches.sources import AnyModelSource

README = Path(__file__).resolve().parents[1] / "docs" / "library-guide.md"


def test_the_readme_table_has_a_row_per_source_with_its_key() -> None:
    text = README.read_text()
    table = text[text.index("### Model sources"):text.index("**Refresh per source.**")]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith(("| source", "| ---"))]
    keys = [next(f.name for f in dataclasses.fields(arm) if f.default is dataclasses.MISSING)
            for arm in typing.get_args(AnyModelSource)]
    assert len(rows) == len(keys) == 4
    for key in keys:
        assert sum(f"`{key}`" in row.split("|")[1] for row in rows) == 1, key
    assert all(len(row.split("|")) == 7 and all(cell.strip() for cell in row.split("|")[1:6]) for row in rows)
