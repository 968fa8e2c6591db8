"""The Python examples run to the end and reach their goals (examples/python)."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import deft

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples" / "python"


def run_example(name, *args, env=None):
    """Run an example with this interpreter; its output (it must exit 0)."""
    done = subprocess.run([sys.executable, str(EXAMPLES / name), *args], capture_output=True,
                          text=True, timeout=300, env={**os.environ, **(env or {})})
    assert done.returncode == 0, f"{name} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_import_mxnet_matches_mxnet():
    out = run_example("import_mxnet.py")
    diffs = [float(d) for d in re.findall(r"max \|deft - MXNet\| = (\S+)", out)]
    assert len(diffs) == 2, out  # LeNet, and ResNet-18 from parameters rebuilt from the seed
    assert max(diffs) < 1e-5, out
    assert "all 2 models match MXNet" in out


def test_import_mxnet_fails_on_an_unknown_model():
    done = subprocess.run([sys.executable, str(EXAMPLES / "import_mxnet.py"), "--models",
                           "model_nonexistent"], capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "model_nonexistent is not in the corpus" in done.stderr


def test_mlp_digits_trains_compiled_and_reports_its_speed(tmp_path):
    pytest.importorskip("sklearn")
    out = run_example("mlp_digits.py", "--out", str(tmp_path / "mlp"))
    assert float(re.search(r"final test accuracy: (\S+)", out).group(1)) >= 0.95, out
    assert re.search(r"epoch 12  mode hybridized  loss \S+  train_accuracy", out), out
    log = deft.TrainingLog.load(str(tmp_path / "mlp_log.jsonl")).history
    assert log["epoch"] == list(range(1, 13)) and log["mode"][:2] == ["eager", "hybridized"]
    assert log["lr"][-1] < log["lr"][1]  # the cosine schedule ran down
    pytest.importorskip("matplotlib")
    png = tmp_path / "mlp_curves.png"
    assert f"wrote the loss and accuracy curves to {png}" in out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # timed, not asserted: tests never assert on time
    assert re.search(r"best and median of 15 alternating rounds: eager \d+ us \(\d+\), "
                     r"hybridized \d+ us \(\d+\): hybridized is \S+x as fast", out), out
    net = deft.nn.SymbolBlock.imports(str(tmp_path / "mlp-symbol.json"), ["data"],
                                      str(tmp_path / "mlp-0000.params"))
    with deft.autograd.predict_mode():
        assert net(deft.array(np.zeros((2, 64), np.float32))).shape == (2, 10)


def test_checkpoint_resume_repeats_the_uninterrupted_curve(tmp_path):
    pytest.importorskip("sklearn")
    out = run_example("checkpoint_resume.py", "--epochs", "4", "--stop", "2", "--out",
                      str(tmp_path / "ckpt"))
    curves = re.findall(r"(?:uninterrupted|resumed) +(\[.*\])", out)
    assert len(curves) == 2 and curves[0] == curves[1], out
    assert float(re.search(r"largest difference between the curves: (\S+)", out).group(1)) < 1e-5
    for suffix in (".params", ".states", "_log.jsonl"):
        assert (tmp_path / ("ckpt" + suffix)).exists()


def test_cnn_digits_learns_quickly(tmp_path):
    pytest.importorskip("sklearn")
    out = run_example("cnn_digits.py", "--out", str(tmp_path / "cnn"),
                      env={"DEFT_DEMO_QUICK": "1"})
    acc = float(re.search(r"final test accuracy: (\S+)", out).group(1))
    assert acc >= 0.9, out
    timed = r"\d+ us \(\d+\), [\d.]+x as fast \([\d.]+x by the best\)"
    assert re.search(rf"training step \(batch 32\), median \(best\) of alternating rounds: "
                     rf"eager \d+ us \(\d+\); hybridized {timed}; compiled {timed}", out), out
    assert re.search(rf"inference \(batch 32\), median \(best\) of alternating rounds: "
                     rf"eager \d+ us \(\d+\); hybridized {timed}", out), out
    assert re.search(r"epoch  2 \(compiled", out), out  # the epochs after the first compiled
    # the exported graph loads back and classifies as the trained network did
    net = deft.nn.SymbolBlock.imports(str(tmp_path / "cnn-symbol.json"), ["data"],
                                      str(tmp_path / "cnn-0000.params"))
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = deft.array((digits.images[:200] / 16.0).astype(np.float32)[:, None])
    with deft.autograd.predict_mode():
        pred = net(x).asnumpy().argmax(axis=1)
    assert (pred == digits.target[:200]).mean() >= 0.9
