"""The README's variable table is the table the code checks inventories against."""
import difflib
from pathlib import Path

from vfleet.config.variables import VARIABLES, markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_table() -> str:
    text = README.read_text()
    start = text.index("<!-- variables-table:start")
    start = text.index("-->", start) + 3
    end = text.index("<!-- variables-table:end -->")
    return text[start:end].strip()


def test_variables_table_in_readme_is_current():
    have, want = _readme_table(), markdown_table().strip()
    diff = "\n".join(difflib.unified_diff(have.splitlines(), want.splitlines(), "README.md",
                                          "markdown_table()", lineterm="", n=0))
    assert have == want, \
        "README variable table is stale: regenerate it from roles.variables.markdown_table()\n" + diff


def test_every_variable_has_one_row():
    rows = [line.split("|")[1].strip() for line in markdown_table().splitlines()[2:]]
    assert rows == [f"`{v.name}`" for v in VARIABLES]
    assert len(set(rows)) == len(rows)
