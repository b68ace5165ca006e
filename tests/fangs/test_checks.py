"""Parameter and input checks (_checks.py and the samples checks): errors name the problem."""

from __future__ import annotations

import numpy as np
import pytest

from scontrast.core import ScontrastError
from scontrast.fangs._draws import draws
from scontrast.fangs._loss import expected_loss, faro_loss
from scontrast.fangs._search import fangs
from scontrast.feature_samples import check_samples


def test_bad_inputs_raise_naming_the_problem():
    good = np.zeros((5, 2), np.uint8)
    with pytest.raises(ScontrastError, match=r"^samples\[1\]: has 4 rows"):
        check_samples([good, np.zeros((4, 2))])
    with pytest.raises(ScontrastError, match=r"^samples\[1\]: is not binary"):
        check_samples([good, np.full((5, 1), 0.5)])
    with pytest.raises(ScontrastError, match=r"^samples\[0\]: is not binary.*2"):
        expected_loss([np.array([[2, 0]])], np.zeros((1, 1)))
    with pytest.raises(ScontrastError, match="^samples: is empty"):
        fangs([])
    with pytest.raises(ScontrastError, match=r"^samples\[0\]: expected a 2-d"):
        check_samples([np.zeros(5)])
    with pytest.raises(ScontrastError, match="^estimate: has 3 rows"):
        expected_loss([good], np.zeros((3, 1)))
    with pytest.raises(ScontrastError, match="^sample: has 6 rows"):
        faro_loss(good, np.zeros((6, 1)))
    with pytest.raises(ScontrastError, match="^estimate: is not binary"):
        faro_loss(np.array([[np.nan]]), np.zeros((1, 1)))
    for a in (0, 2, -1, 2.5, True, "1"):
        with pytest.raises(ScontrastError, match=r"^a: expected a finite number > 0\.0 and < 2\.0"):
            faro_loss(good, good, a=a)
    with pytest.raises(ScontrastError, match="^n_init: expected an integer >= 1"):
        fangs([good], n_init=0)
    with pytest.raises(ScontrastError, match="^n_sweet: expected an integer >= 1"):
        fangs([good], n_sweet=2.0)
    with pytest.raises(ScontrastError, match="^n_iter: expected an integer >= 0 or None"):
        fangs([good], n_iter=-1)
    with pytest.raises(ScontrastError, match="^max_seconds: expected a finite number > 0"):
        fangs([good], max_seconds=-1)
    with pytest.raises(ScontrastError, match=r"^n_iter: None \(no cap on the flips\) needs a time limit"):
        fangs([good], n_iter=None)
    with pytest.raises(ScontrastError, match="^n_jobs: expected a nonzero integer"):
        fangs([good], n_jobs=0)
    with pytest.raises(ScontrastError, match="^n_jobs: expected"):
        draws([good], n_jobs=0)
    for bad in ("seven", -1, 1.5):
        with pytest.raises(ScontrastError, match="^random_state: expected"):
            fangs([good], random_state=bad)
