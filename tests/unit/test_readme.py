"""The variable reference (docs/variables.md) is the table the code checks inventories against,
and the README stays a short front page."""

import difflib
from pathlib import Path

from vfleet.config import reference
from vfleet.config.variables import VARIABLES, markdown_table

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
VARIABLES_PAGE = ROOT / "docs" / "variables.md"


def test_variables_page_is_what_the_generator_writes():
    have, want = VARIABLES_PAGE.read_text(), reference.page()
    diff = "\n".join(
        difflib.unified_diff(
            have.splitlines(), want.splitlines(), "docs/variables.md", "reference.page()", lineterm="", n=0
        )
    )
    assert have == want, "docs/variables.md is stale: regenerate it with `python -m vfleet.config.reference`\n" + diff


def test_every_variable_has_one_row():
    rows = [line.split("|")[1].strip() for line in markdown_table().splitlines()[2:]]
    assert rows == [f"`{v.name}`" for v in VARIABLES]
    assert len(set(rows)) == len(rows)


def test_the_generator_checks_and_writes(tmp_path, capsys):
    page = tmp_path / "variables.md"
    assert reference.main([str(page), "--check"]) == 1
    assert reference.main([str(page)]) == 0
    assert page.read_text() == reference.page()
    assert reference.main([str(page), "--check"]) == 0


def test_readme_is_a_front_page():
    """Details live in docs/; the README keeps what vfleet is, the commands, a tour and links."""
    lines = README.read_text().splitlines()
    assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail into docs/"
    assert "<!-- variables-table:start" not in README.read_text(), "the variable table lives in docs/variables.md"
