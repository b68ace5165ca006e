"""The orientation of a direction."""

import numpy as np

from scontrast.sparda._utils import orient_to_target


def test_orientation_of_a_pure_spread_change_is_the_largest_weight():
    beta = np.array([0.2, -0.9, 0.1])
    assert np.array_equal(orient_to_target(beta, np.zeros(3)), -beta)
    assert np.array_equal(orient_to_target(beta, np.array([0.0, -1.0, 0.0])), beta)
    assert np.array_equal(orient_to_target(beta, np.array([1.0, 0.0, 0.0])), beta)
    assert np.array_equal(orient_to_target(beta, np.array([-1.0, 0.0, 0.0])), -beta)
