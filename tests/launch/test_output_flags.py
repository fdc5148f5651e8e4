"""Every launch script that writes goes through the one output guard (b2tjax/cli/outputs.py), and
each output option it declares is tried on each input option it declares (and inside its data
directory): every such command is refused in one line naming both, before anything is written.

The scripts' `main` runs in this process (the guard comes before any heavy work); the declarations
are checked against the scripts' own `--help`, so an option cannot be declared that does not exist.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from b2tjax.cli.outputs import Paths
from b2tjax.cli.script import run_main
from tests.launch_scripts import ROOT, load_script

pytestmark = pytest.mark.slow  # loads every launch script (and so JAX, the benchmarks, the engine)

SCRIPTS = sorted(p.name for p in (ROOT / "launch").glob("*.py") if p.name != "__init__.py")
# inputs that are directories (the others are files)
DIRS = {"--data", "--checkpoint", "--hf", "--run", "RUN_DIR", "--from-jsonl", "--tp-data", "--init"}
TP = ["--benchmark", "travelplanner"]  # the options only TravelPlanner has


@pytest.fixture(scope="module")
def modules() -> dict[str, object]:
    return {name: load_script(f"launch/{name}") for name in SCRIPTS}


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, Path]:
    """One real input of each kind, and the data directory."""
    out = {}
    for name in ("data", "ckpt", "hf", "run", "tables", "tp"):
        (tmp_path / name).mkdir()
        out[name] = tmp_path / name
    for name in ("instances", "ground_truth"):
        (out["data"] / name).mkdir()
        (out["data"] / name / "test.jsonl").write_text('{"id": "test-easy-00000"}\n')
    out["config"] = tmp_path / "recipe.yaml"
    shutil.copy(ROOT / "configs" / "tiny_cpu.yaml", out["config"])
    for name, text in (("plans", '{"id": "x", "plan": []}\n'), ("rollouts", "{}\n"), ("file", "x\n")):
        out[name] = tmp_path / f"{name}.jsonl"
        out[name].write_text(text)
    out["script"] = tmp_path / "job.py"
    out["script"].write_text("print('ran')\n")
    return out


def _command(script: str, option: str, value: Path, output: str, target: Path, p: dict) -> list[str]:
    """A command of `script` that reaches its output guard with `option` = `value`."""
    given = {option: value, output: target}

    def pick(flag: str, default: Path) -> list[str]:
        return [flag, str(given.get(flag, default))]

    extra = [*TP, *pick("--queries", p["file"])] if option == "--queries" else []
    outs = [x for o in ("--json", "--details", "--report") if o in given for x in (o, str(given[o]))]
    if script == "eval.py":
        source = {
            "--records": pick("--records", p["rollouts"]),
            "--checkpoint": ["--policy", "model", "--agent", "himap", *pick("--checkpoint", p["ckpt"])],
            "--config": [
                *("--policy", "model", "--agent", "himap"),
                *pick("--checkpoint", p["ckpt"]),
                *pick("--config", p["config"]),
            ],
        }.get(option, pick("--plans", p["plans"]))
        return [*extra, *pick("--data", p["data"]), *source, *outs]
    if script == "rollouts.py":
        model = pick("--checkpoint", p["ckpt"]) if option == "--checkpoint" else ["--model", "tiny"]
        more = [option, str(value)] if option in ("--config", "--tokenizer") else []
        return [*extra, *model, *pick("--data", p["data"]), *pick("--out", p["file"]), *more]
    if script == "report.py":
        more = [x for o in ("--run", "--tokenizer") if o == option for x in (o, str(value))]
        return [
            *extra,
            *pick("--data", p["data"]),
            *pick("--rollouts", p["rollouts"]),
            *pick("--out", p["file"]),
            *more,
        ]
    if script == "export_hf.py":
        more = pick("--tokenizer", p["file"]) if option == "--tokenizer" else []
        return [*pick("--checkpoint", p["ckpt"]), *pick("--out", p["file"]), *more]
    if script == "import_hf.py":
        return [*pick("--hf", p["hf"]), *pick("--out", p["file"])]
    if script == "plan.py":
        return [*pick("--config", p["config"]), *pick("--json", p["file"])]
    if script == "plot.py":
        return [str(given.get("RUN_DIR", p["run"])), *pick("--out", p["file"])]
    if script == "train.py":
        init = ["--init", f"ckpt:{value}"] if option == "--init" else []
        data = f"data.data_dir={given.get('--data', p['data'])}"
        return [*pick("--config", p["config"]), *pick("--out", p["file"]), *init, data]
    if script == "make_data.py":
        source = {
            "--from-jsonl": pick("--from-jsonl", p["tables"]),
            "--tp-data": [*TP, *pick("--tp-data", p["tp"])],
        }
        return [*pick("--out", p["file"]), *source.get(option, [])]
    if script == "serve.py":
        source = pick("--hf", p["hf"]) if option == "--hf" else pick("--checkpoint", p["ckpt"])
        more = [option, str(value)] if option in ("--config", "--tokenizer") else []
        return [*source, *pick("--records", p["file"]), *more]
    if script == "cluster.py":
        return [*pick("--log-dir", p["file"]), str(given.get("script", p["script"]))]
    raise AssertionError(f"no command for {script}: add one here")


def _value(option: str, p: dict) -> Path:
    kind = {"--data": "data", "--checkpoint": "ckpt", "--hf": "hf", "--run": "run", "RUN_DIR": "run"}
    kind |= {"--from-jsonl": "tables", "--tp-data": "tp", "--init": "ckpt", "--plans": "plans"}
    kind |= {"--records": "rollouts", "--rollouts": "rollouts", "--config": "config", "script": "script"}
    return p[kind.get(option, "file")]


def _refused(module, argv: list[str], capsys, *names: str) -> None:
    assert run_main(module.main, argv) == 2, argv
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), (argv, err)
    for name in names:
        assert name in err[0], (name, err[0])


def test_every_launch_script_declares_its_paths_and_uses_the_one_guard(modules, capsys):
    for name, module in modules.items():
        paths = getattr(module, "PATHS", None)
        assert isinstance(paths, Paths) and paths.outputs, f"{name} declares no PATHS for the output guard"
        source = (ROOT / "launch" / name).read_text()
        assert "check_output_file" not in source and "check_outputs(" not in source, name
        for option in (*paths.outputs, *paths.inputs, *paths.data):
            label = option.partition(":")[0]
            argv = (TP if label in ("--queries", "--tp-data") else []) + ["--help"]
            with pytest.raises(SystemExit):
                module.main(argv)
            assert label in capsys.readouterr().out, f"{name} declares {label}, its --help has none"


def test_each_output_on_each_input_and_in_the_data_is_refused(modules, paths, capsys):
    tried = 0
    for name, module in modules.items():
        declared: Paths = module.PATHS
        for output in declared.outputs:
            for option in (o.partition(":")[0] for o in declared.inputs):
                value = _value(option, paths)
                target = value if declared.dirs or value.is_file() else value / "out"
                argv = _command(name, option, value, output, target, paths)
                _refused(module, argv, capsys, output, option, "input")
                tried += 1
            for option in declared.data:
                argv = _command(name, option, paths["data"], output, paths["data"] / "new", paths)
                _refused(module, argv, capsys, output, "data directory")
                tried += 1
    assert tried >= 30
    assert not (paths["data"] / "new").exists() and paths["script"].read_text() == "print('ran')\n"


def test_an_object_store_url_on_each_output_is_refused_before_any_work(modules, paths, capsys, tmp_path):
    """`--out gs://BUCKET/run` would become a local folder `gs:/BUCKET/run` and fail at the first
    checkpoint, after training: every declared output refuses a URL in one line, creating nothing."""
    tried = 0
    for name, module in modules.items():
        for output in module.PATHS.outputs:
            for scheme in ("gs", "s3"):
                argv = _command(name, "", paths["file"], output, f"{scheme}://bucket/run", paths)
                _refused(module, argv, capsys, output, f"({scheme}://) is not supported")
                tried += 1
    assert tried >= 24
    assert not list(Path.cwd().glob("gs:")) and not list(Path.cwd().glob("s3:"))
