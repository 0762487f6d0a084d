"""The order of one sort key: a permutation inverted in one pass, anything else sorted stably; both
against numpy's stable lexsort."""

from __future__ import annotations

import numpy as np
import pytest

from strata.query.limit_spec import _order_of_one


@pytest.mark.parametrize("seed", range(5))
def test_one_key_orders_as_a_stable_sort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 400))
    keys = [
        rng.permutation(n).astype(np.int64) + 7,  # distinct consecutive: inverted
        -(rng.permutation(n).astype(np.int64)),  # a descending rank
        rng.integers(0, max(1, n // 3), n),  # ties
        np.append(rng.permutation(n - 1), 0) if n > 1 else np.zeros(1, np.int64),  # a tie, full span
        rng.permutation(n).astype(np.int64) * 2,  # distinct, gaps
        rng.normal(size=n),  # floats
    ]
    for key in keys:
        assert _order_of_one(key).tolist() == np.lexsort([key]).tolist()
