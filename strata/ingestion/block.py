"""A block of raw input rows: what readers yield and every stage after them takes.

Its own module so that stages the spec names (the row stage) take blocks without importing the
readers, which import the spec.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from strata.ingestion.errors import ParseProblem


@dataclass
class Block:
    """Raw rows of one stretch of one input, and where each row came from."""

    table: pa.Table
    source: str
    first_line: int
    line_numbers: npt.NDArray[np.int64] | None = None  # per row; None means first_line + row index
    problems: list[ParseProblem] = field(default_factory=list)
    progress_bytes: int = 0  # input bytes consumed by this block (for progress bars)
    end_line: int = 0  # text input: the line number just past this block's lines

    def lines(self, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.int64]:
        if self.line_numbers is not None:
            return self.line_numbers[rows]
        return np.asarray(rows, dtype=np.int64) + self.first_line
