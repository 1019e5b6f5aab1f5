"""The README's variable table is the table the code checks inventories against."""
from pathlib import Path

from roles.variables import markdown_table

README = Path(__file__).resolve().parents[2] / "README.md"


def test_variables_table_in_readme_is_current():
    text = README.read_text()
    start = text.index("<!-- variables-table:start")
    start = text.index("-->", start) + 3
    end = text.index("<!-- variables-table:end -->")
    assert text[start:end].strip() == markdown_table().strip(), \
        "README variable table is stale: regenerate it from roles.variables.markdown_table()"
