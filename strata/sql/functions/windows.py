"""Druid's window functions: DuckDB computes each as written (same names, same frames)."""

from __future__ import annotations

from strata.sql.functions.spec import FunctionSpec, specs

WINDOW_SPECS: list[FunctionSpec] = specs(
    "window",
    "window",
    {
        "ROW_NUMBER": "The row's number in its window, from 1.",
        "RANK": "Rank with gaps after ties.",
        "DENSE_RANK": "Rank without gaps.",
        "PERCENT_RANK": "(rank - 1) / (rows - 1).",
        "CUME_DIST": "Rows at or before the row's rank / rows.",
        "NTILE": "The row's tile among N tiles as even as possible.",
        "LAG": "A value N rows before (with a default).",
        "LEAD": "A value N rows after (with a default).",
        "FIRST_VALUE": "The value of the frame's first row.",
        "LAST_VALUE": "The value of the frame's last row.",
    },
)
