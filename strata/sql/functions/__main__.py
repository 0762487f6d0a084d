"""`python -m strata.sql.functions`: writes docs/sql-functions.md from the registry."""

from __future__ import annotations

from strata.sql.functions.docs import PAGE, render

if __name__ == "__main__":
    PAGE.write_text(render(), encoding="utf-8")
    print(f"wrote {PAGE.name}")
