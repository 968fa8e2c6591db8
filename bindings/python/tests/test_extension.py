"""Graph passes from extension libraries (examples/lib_pass), from Python."""
import pathlib

import numpy as np
import pytest

import deft
from deft import nn

BUILD = pathlib.Path(__file__).resolve().parents[3] / "build"
FOLD = BUILD / "examples" / "lib_pass" / "libdeft_fold_pass.so"


@pytest.fixture(scope="module")
def fold_lib():
    if not FOLD.exists():
        pytest.skip(f"{FOLD} is built by the C build (./scripts/test.sh builds it)")
    deft.load_lib(FOLD)
    deft.load_lib(FOLD)  # again: nothing happens
    assert "fold_identity" in deft.list_lib_passes()


def test_optimize_for_folds_identities(fold_lib):
    x = deft.array([1.0, 2.0, 3.0])
    with deft.deferred_compute():
        y = ((x * 1) + 0) * 3
    sym = deft.export({"x": x}, {"y": y})
    folded = sym.optimize_for("fold_identity", verbose=0)
    assert folded.tojson().count('"op":\t"_') == 1
    assert sym.tojson().count('"op":\t"_') == 3  # the original is untouched
    np.testing.assert_array_equal(deft.CachedOp(folded)(x).asnumpy(), [3, 6, 9])
    with pytest.raises(ValueError, match="unknown option 'speed'"):
        sym.optimize_for("fold_identity", speed=11)
    with pytest.raises(ValueError, match="unknown pass 'nope'"):
        sym.optimize_for("nope")


def test_hybridize_with_a_backend(fold_lib):
    class Scaled(nn.HybridBlock):
        def forward(self, x):
            return (x * 1 + 0) * 2

    block = Scaled()
    out = block.optimize_for(deft.array([1.0, 2.0]), backend="fold_identity")
    np.testing.assert_array_equal(out.asnumpy(), [2, 4])
    assert block._last_symbol.tojson().count('"op":\t"_') == 1
    with pytest.raises(ValueError, match="cannot load"):
        deft.load_lib("/nonexistent/libnothing.so")
