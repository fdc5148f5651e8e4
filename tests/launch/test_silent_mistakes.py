"""A mistake that used to run silently is refused at start-up in one line naming the setting: a
model setting that disagrees with `--init`'s weights, `--resume` of a run that is not there, a
mistyped `data.data_dir` under a recipe that builds its data, data built against other tools; and
messages that name the mistake made (a missing `--init` directory, a mistyped `--config`, a run
given where its checkpoints belong).

Each runs launch/train.py's main in-process up to the check (nothing is trained or built)."""

from __future__ import annotations

import json
import shutil

import pytest

from b2tjax.data.marker import MARKER, check_data_dir
from b2tjax.errors import UserError
from models.config import get_config
from tests.launch_scripts import load_script
from tests.tp_fixtures import tp_data  # noqa: F401 - fixture


def _refused(argv: list[str], capsys, script: str = "launch/train.py") -> str:
    """The one line the launch script exits with (status 2) for `argv`."""
    script = load_script(script)
    code = script.run_main(script.main, argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    return err[0]


def _weights(tmp_path):
    """A directory whose config.json is the tiny preset's (all the check reads of the weights)."""
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "config.json").write_text(json.dumps(get_config("tiny").to_hf("float32")))
    return tmp_path / "w"


def test_a_model_setting_that_disagrees_with_the_init_weights_is_refused(tmp_path, capsys):
    weights, out = _weights(tmp_path), tmp_path / "run"
    init = ["task=toy", "--init", f"hf:{weights}", "--out", str(out)]
    line = _refused([*init, "model.preset=qwen3-4b"], capsys)
    assert "model.preset=qwen3-4b" in line and "hidden_size" in line and "disagrees with the weights" in line
    line = _refused(["task=toy", "--init", f"ckpt:{weights}", "model.overrides.num_hidden_layers=7"], capsys)
    assert line.count("model.overrides.num_hidden_layers=7") == 1 and "num_hidden_layers 2" in line
    assert not out.exists()  # refused before the run directory (and its config.yaml) is written


def test_resume_of_a_run_that_is_not_there_is_an_error(tmp_path, capsys):
    typo = tmp_path / "runs" / "tnyi"
    line = _refused(["task=toy", "--resume", "--out", str(typo)], capsys)
    assert f"--resume: {typo} holds no run" in line and not typo.exists()


def test_a_mistyped_data_dir_is_not_built_even_by_a_recipe_that_builds_its_own(tmp_path, capsys):
    typo = tmp_path / "data" / "smal"
    line = _refused([f"data.data_dir={typo}", "--out", str(tmp_path / "r")], capsys)  # the tiny recipe
    assert f"data.data_dir {typo} does not exist" in line and "data.build_missing=true" in line
    assert not typo.exists()
    train = load_script("launch/train.py")
    assert train.builds_missing_data([], True)  # the recipe's own path: built
    assert train.builds_missing_data([f"data.data_dir={typo}", "data.build_missing=true"], True)


def test_data_built_against_other_tools_is_refused(tp_data, tmp_path):
    data = tmp_path / "tp"
    shutil.copytree(tp_data, data)
    marker = json.loads((data / MARKER).read_text())
    assert len(marker["tools"]) == 16
    check_data_dir(data, "travelplanner")  # as built: accepted
    (data / MARKER).write_text(json.dumps({**marker, "tools": "0" * 16}))
    with pytest.raises(UserError, match=r"was built with other tool schemas than this code's"):
        check_data_dir(data, "travelplanner")


def test_messages_name_the_mistake_made(tmp_path, capsys):
    missing = tmp_path / "Qwen3-0.6B"
    line = _refused(["--init", f"hf:{missing}", "--out", str(tmp_path / "r")], capsys)
    assert f"{missing} is not a directory" in line and "tokenizer" not in line
    line = _refused(["--config", "configs/qwen3_06b.yaml"], capsys)
    assert line.endswith("does not exist; did you mean configs/qwen3_0.6b.yaml or configs/qwen3_8b.yaml?")
    (tmp_path / "run" / "checkpoints").mkdir(parents=True)
    argv = ["--checkpoint", str(tmp_path / "run"), "--out", str(tmp_path / "hf")]
    line = _refused(argv, capsys, "launch/export_hf.py")
    assert line.endswith(f"is a training run: pass {tmp_path / 'run' / 'checkpoints'}")
