"""The command lines of the README and of every guide (docs/guides/), in the order they give them: a
page that drifts from the code fails here.

The README keeps the two commands a newcomer runs first, exactly, and the line where the suite's
measured times go. Every `python launch/...` / `python benchmarks/...` command of the pages' bash
blocks (the README first, then the guides by name, sharing one scratch directory) is taken in
order (continuations joined, comments and `VAR=value` prefixes dropped; in the reference section an
optional `[...]` group is left out and `a|b` reads as `a`). What a command costs decides what is
checked, so the whole walk stays near a minute on 2 cores:
- `make_data.py` runs for real, in a scratch working directory, when its `--out` does not exist yet
  and its world is the small one (B2T with `--instances 1`: 3 instances per split; TravelPlanner
  with `--generated 4`); a full-scale build is parsed only;
- `eval.py` runs for real when its `--data` exists and its plans come from the scripted expert
  (`--policy expert`, single agent or HiMAP team) or from a file that exists; otherwise it is parsed;
- `train.py` and `plan.py` are parsed by their own parsers and their recipe is loaded with its
  `key=value` overrides (`load_config`), so a renamed flag, a removed recipe or a stale config key
  fails; a small-world run's data step (make_data into `data.data_dir`) runs for real when that
  directory is absent, as the run would do first (`--instances 1`);
- the other launch scripts (rollouts, HF import/export, plots) are parsed by their own parsers;
- a benchmark script must exist.
A real run that fails, or a parser that rejects a README line, fails the test with the line.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from b2tjax.config import load_config
from tests.launch_scripts import ROOT, load_script

pytestmark = pytest.mark.slow  # walks the README's command lines

SCRATCH_LINKS = ("configs", "launch")  # what relative README paths need inside the scratch directory


def readme_commands(text: str) -> list[list[str]]:
    """The argv (script first) of every python command of the README's bash blocks, in order."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            while re.search(r"\[[^\[\]]*\]", line):  # optional groups, innermost first
                line = re.sub(r"\s*\[[^\[\]]*\]", "", line)
            tokens = shlex.split(line, comments=True)
            segments, current = [], []
            for token in [*tokens, "&&"]:
                if token == "&&":
                    segments.append(current)
                    current = []
                else:
                    current.append(token)
            for argv in segments:
                while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
                    argv = argv[1:]
                if len(argv) >= 2 and argv[0] == "python" and argv[1].endswith(".py"):
                    commands.append([argv[1]] + [a.split("|")[0] if "|" in a else a for a in argv[2:]])
    return commands


GUIDES = ROOT / "docs" / "guides"
TWO_COMMANDS = ("pip install -e . && python launch/train.py", 'pip install -e ".[test]" && python -m pytest')
SUITE_TIMES = "<!-- suite-times -->"  # where the measured suite and fast-lane times go


def _make_data(argv: list[str]) -> None:
    from b2tjax.cli import make_data

    args = make_data.parse_args(argv)
    if args.out.exists() or args.scale != "small":
        return
    if args.benchmark == "b2t" and "--instances" not in argv:
        argv = [*argv, "--instances", "1"]
    if args.benchmark == "travelplanner" and "--generated" not in argv:
        argv = [*argv, "--generated", "4"]  # the 45 official queries + 4
    assert make_data.main(argv) == 0, argv


def _train(module, argv: list[str]) -> None:
    args = module.parse_args(argv)
    cfg, _ = module.resolve_config(args, module.read_recipe(args))  # (config, the changes of a resume)
    small = cfg.data.world_scale == "small"  # a full world is minutes: its recipes are parsed only
    if cfg.task == "travel" and small and not Path(cfg.data.data_dir).exists():
        data = ["--out", cfg.data.data_dir, "--scale", cfg.data.world_scale]
        _make_data(["--benchmark", cfg.benchmark, *data])


def _eval(module, argv: list[str]) -> None:
    args = module.parse_args(argv)
    files = [p for p in (args.plans, args.records) if p is not None]
    ready = args.data is not None and args.data.is_dir()
    if ready and (args.policy == "expert" or (files and all(p.is_file() for p in files))):
        assert module.main(argv) == 0, argv


def _check(argv: list[str]) -> None:
    script, rest = argv[0], argv[1:]
    assert (ROOT / script).is_file(), f"{script} does not exist"
    if not script.startswith("launch/"):
        return
    if script == "launch/make_data.py":
        _make_data(rest)
        return
    module = load_script(script)
    if script == "launch/train.py":
        _train(module, rest)
    elif script == "launch/eval.py":
        _eval(module, rest)
    elif script == "launch/plan.py":
        args = module.parse_args(rest)
        load_config(args.config, args.overrides)
    else:
        module.parse_args(rest)


def test_readme_keeps_the_two_commands_and_the_times_line():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    for command in TWO_COMMANDS:
        assert any(block.strip() == command for block in blocks), command
    assert SUITE_TIMES in text.splitlines()


def test_page_commands_in_order(tmp_path, monkeypatch):
    readme = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))
    assert readme[0] == ["launch/train.py"]
    guides = sorted(GUIDES.glob("*.md"))
    commands = readme + [c for page in guides for c in readme_commands(page.read_text(encoding="utf-8"))]
    assert len(guides) >= 10 and len(commands) >= 40
    for name in SCRATCH_LINKS:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for argv in commands:
        try:
            _check(argv)
        except SystemExit as err:  # an argparse rejection
            line = f"python {shlex.join(argv)}"
            pytest.fail(f"README line `{line}` is rejected by its parser (exit {err.code})")
