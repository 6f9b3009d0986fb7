"""median_of_others against its definition: for each value, np.median of all the others."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from neurotui.metrics.ranks import find_stragglers, median_of_others


@given(st.lists(st.floats(0.001, 100.0) | st.sampled_from([0.5, 1.0, 2.0]), min_size=2,
                max_size=40))
def test_each_value_against_the_median_of_the_others(values: list[float]) -> None:
    array = np.array(values)
    expected = [np.median(np.delete(array, i)) for i in range(len(array))]
    assert np.allclose(median_of_others(array), expected)


def test_one_slow_rank_of_a_job_of_thousands_is_found() -> None:
    medians = {r: 1.0 + 0.001 * (r % 7) for r in range(2048)}
    medians[1234] = 1.5
    assert find_stragglers(medians) == [1234]
