"""What a launch does before JAX starts: reading a recipe imports no JAX (a config is data: `--help`,
checks and make_data's worker processes must not pay for, or be forked after, the JAX runtime), and
launch/train.py builds missing data before any JAX backend is initialised."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("jax", "jaxlib", "flax", "optax", "orbax", "numpy")


def test_loading_and_checking_every_recipe_imports_no_jax():
    recipes = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "configs").glob("*.yaml"))
    assert len(recipes) > 5
    code = (
        "import sys\nfrom b2tjax.config import load_config, validate\n"
        f"for r in {recipes!r}:\n    validate(load_config(r))\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


PROBE = """
import json, runpy, sys
from b2tjax.cli import make_data
from jax._src import xla_bridge  # importing JAX is harmless; starting its runtime before a fork is not

def probe(argv):
    print(json.dumps({"argv": argv, "jax_started": xla_bridge.backends_are_initialized()}), flush=True)
    sys.exit(0)

make_data.main = probe
sys.argv = ["launch/train.py", "--out", "run"]
runpy.run_path(sys.argv_script, run_name="__main__")
"""


def test_train_builds_missing_data_before_jax_starts(tmp_path: Path):
    """The tiny recipe's data is absent in a fresh folder: launch/train.py calls make_data (which
    forks workers) while no JAX backend exists yet; the probe stands in for the build."""
    code = PROBE.replace("sys.argv_script", repr(str(ROOT / "launch" / "train.py")))
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert "--out" in seen["argv"] and seen["jax_started"] is False
