import gc

import numpy as np
import pytest

import deft


@pytest.fixture
def no_leaks():
    """Checks that a test leaves as many arrays and live bytes as it found."""
    gc.collect()
    deft.waitall()
    arrays, nbytes = deft.live_arrays(), deft.memory_stat("live_bytes")
    yield
    gc.collect()
    deft.waitall()
    assert deft.live_arrays() == arrays
    assert deft.memory_stat("live_bytes") == nbytes


@pytest.fixture
def rng():
    return np.random.default_rng(0)
