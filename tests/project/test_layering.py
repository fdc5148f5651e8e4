"""The package layering of docs/ARCHITECTURE.md, enforced.

`sandbox/` is pure Python (its tools run in worker processes forked before JAX starts, and users
evaluate plans on machines without an accelerator stack), and the packages depend one way only:
sandbox <- models <- rollout <- b2tjax, with rollout and b2tjax free to use sandbox. Inside sandbox,
each benchmark is one folder `sandbox/benchmarks/<name>/` that no module outside it imports: the
core and the HiMAP protocol import no benchmark at all, and rollout/ and b2tjax/ reach benchmarks
only through the registry (`sandbox.benchmarks`, `sandbox.benchmarks.base`). A static scan of every
import statement (function-level ones included: a cycle hidden inside a function is still a cycle)
checks these rules and that no package has an import cycle; a fresh interpreter checks that
importing all of sandbox loads neither jax nor flax.

Inside b2tjax/ the rooms of docs/ARCHITECTURE.md ("b2tjax/: rooms that follow a training step")
depend downward only: the library never imports its launch scripts' helpers (b2tjax/cli/), the
jitted step and the GRPO / SFT math know nothing of runs, tasks or plans, and the config and data
rooms sit below everything that reads them. The jitted step imports neither the GRPO room nor the
sampler (so never `rollout.hosts`: a step's one agreement is the trainer's, b2tjax/run/agreement.py),
and the pure GRPO loss (b2tjax/step/loss.py) is a leaf.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sandbox", "models", "rollout", "b2tjax")
# package -> the project packages it must never import
FORBIDDEN = {
    "sandbox": {"models", "rollout", "b2tjax"},
    "models": {"rollout", "b2tjax", "sandbox"},
    "rollout": {"b2tjax"},
    "b2tjax": set(),
}


def _module_files(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the project packages under `root`."""
    modules = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = path
    return modules


def _runtime_nodes(tree: ast.AST):
    """Every node except those under `if TYPE_CHECKING:` (imports there never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and getattr(child.test, "id", None) == "TYPE_CHECKING":
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imported_names(module: str, path: Path) -> list[str]:
    """Every dotted name an import statement of the file may load (absolute; relative resolved)."""
    names = []
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # "from a import b" loads a.b when b is a module, else takes the name b from a
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def import_graph(root: Path) -> dict[str, set[str]]:
    """module -> project modules it imports (each import resolved to the longest existing module)."""
    modules = _module_files(root)
    graph: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        graph[module]
        for name in _imported_names(module, path):
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != module:
                graph[module].add(name)
    return graph


_ABOVE_THE_STEP = {"b2tjax.run", "b2tjax.tasks", "b2tjax.cli", "b2tjax.plan", "b2tjax.report"}
_COLLECTIVES = {"rollout.hosts"}
# Plain choices (Literals) that import nothing (ROOM_FORBIDDEN holds them to it): any room reads them
_VOCABULARY = {"b2tjax.grpo.modes"}  # cross-process agreements: the trainer's, never the layout's
# b2tjax room -> the rooms it must never import (b2tjax.cli: only launch scripts and cli/ itself);
# the first room that holds a module decides
ROOM_FORBIDDEN = {
    "b2tjax.grpo.modes": {"b2tjax", "rollout", "sandbox", "models"},
    "b2tjax.step.loss": {"b2tjax", "rollout", "sandbox"},
    "b2tjax.errors": {"b2tjax"},
    "b2tjax.data": _ABOVE_THE_STEP | {"b2tjax.step", "b2tjax.grpo", "b2tjax.sft", "b2tjax.config"},
    "b2tjax.config": _ABOVE_THE_STEP | {"b2tjax.step", "b2tjax.sft", "b2tjax.data"},
    "b2tjax.step": _ABOVE_THE_STEP | {"b2tjax.sft", "b2tjax.grpo", "rollout"},
    "b2tjax.grpo": _ABOVE_THE_STEP | _COLLECTIVES,
    "b2tjax.sft": _ABOVE_THE_STEP | _COLLECTIVES | {"b2tjax.grpo"},
    "b2tjax.tasks": {"b2tjax.cli", "b2tjax.plan", "b2tjax.run", "b2tjax.report"},
    "b2tjax.run": {"b2tjax.cli", "b2tjax.plan"},
    "b2tjax.report": {"b2tjax.cli", "b2tjax.plan", "b2tjax.tasks", "b2tjax.run.trainer"},
    "b2tjax.plan": {"b2tjax.cli"},
}


def _room_crosses(a: str, b: str) -> bool:
    """Whether b2tjax module `a` importing `b` goes up the rooms (ROOM_FORBIDDEN)."""
    if b in _VOCABULARY:
        return False
    for room, forbidden in ROOM_FORBIDDEN.items():
        if a == room or a.startswith(room + "."):
            return any(b == f or (b.startswith(f + ".") and not b.startswith(room)) for f in forbidden)
    return False


REGISTRY = "sandbox.benchmarks"
# What generic code may import of the benchmarks: the registry, the interface and the interface's
# plain-data episode view format (view.py, what Benchmark.episode_view returns).
REGISTRY_MODULES = {REGISTRY, f"{REGISTRY}.base", f"{REGISTRY}.view"}


def _benchmark_of(module: str) -> str | None:
    """The benchmark package a module belongs to ("sandbox.benchmarks.b2t"), None for others."""
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[:2]) == REGISTRY and module not in REGISTRY_MODULES:
        return ".".join(parts[:3])
    return None


AGENTS = "rollout.agents"  # the one room of rollout/ that knows particular agents
HIMAP = "sandbox.himap"


def _in(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _crosses(a: str, b: str) -> bool:
    """Whether `a` importing `b` breaks the layering (package direction or benchmark isolation)."""
    if b.split(".")[0] in FORBIDDEN[a.split(".")[0]] or _room_crosses(a, b):
        return True
    if _in(a, "rollout") and a != "rollout" and not _in(a, AGENTS) and _in(b, HIMAP):
        return True  # the generic engine speaks no agent's language; rollout/agents/ does
    target = _benchmark_of(b)
    if target is not None and _benchmark_of(a) != target:
        return True  # benchmark code is imported only from inside its own folder
    if a.startswith("sandbox.") and _benchmark_of(a) is None and a not in REGISTRY_MODULES:
        return b in REGISTRY_MODULES  # the core and HiMAP know no benchmark, not even the registry
    return False


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} imports {b}" for a, targets in graph.items() for b in targets if _crosses(a, b))


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_packages_depend_one_way():
    assert layering_violations(import_graph(ROOT)) == []


def test_no_package_has_an_import_cycle():
    assert import_cycles(import_graph(ROOT)) == []


def test_checks_catch_what_they_claim(tmp_path):
    """The scan itself: a sandbox module importing jax-side code and a two-module cycle are found."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "sandbox" / "a.py").write_text("def f():\n    from models import qwen3\n")
    (tmp_path / "models" / "qwen3.py").write_text("from . import sharding\n")
    (tmp_path / "models" / "sharding.py").write_text("def g():\n    from models.qwen3 import X\n")
    (tmp_path / "b2tjax" / "trainer.py").write_text("")
    (tmp_path / "b2tjax" / "step").mkdir()
    (tmp_path / "b2tjax" / "step" / "train_step.py").write_text("from b2tjax.run import trainer\n")
    (tmp_path / "b2tjax" / "run").mkdir()
    (tmp_path / "b2tjax" / "run" / "trainer.py").write_text("from b2tjax.cli.script import run_main\n")
    (tmp_path / "b2tjax" / "cli").mkdir()
    (tmp_path / "b2tjax" / "cli" / "script.py").write_text("")
    (tmp_path / "rollout" / "engine.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from b2tjax import trainer\n"
    )
    graph = import_graph(tmp_path)
    assert layering_violations(graph) == [
        "b2tjax.run.trainer imports b2tjax.cli.script",  # the library never imports its CLI helpers
        "b2tjax.step.train_step imports b2tjax.run.trainer",  # the step knows nothing of runs
        "sandbox.a imports models.qwen3",
    ]
    assert import_cycles(graph) == [["models.qwen3", "models.sharding"]]


def test_benchmark_isolation_is_caught(tmp_path):
    """Reaching into a benchmark from outside its folder (another benchmark, the core, HiMAP,
    rollout) is found, and so is the generic engine (rollout/ outside rollout/agents/) importing
    HiMAP; the registry, a benchmark's own modules and an agent module importing HiMAP are allowed."""
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    files = {
        "sandbox/benchmarks/__init__.py": "from sandbox.benchmarks.base import Benchmark\n",
        "sandbox/benchmarks/base.py": "from sandbox import types\n",
        "sandbox/types.py": "",
        "sandbox/env.py": "from sandbox.benchmarks import base\n",
        "sandbox/himap/__init__.py": "",
        "sandbox/himap/kinds.py": "",
        "sandbox/himap/session.py": "from sandbox.benchmarks.alpha.world import W\n",
        "sandbox/benchmarks/alpha/__init__.py": "",
        "sandbox/benchmarks/alpha/world.py": "from sandbox.benchmarks.alpha import tools\n",
        "sandbox/benchmarks/alpha/tools.py": "from sandbox.benchmarks.base import Benchmark\n",
        "sandbox/benchmarks/beta/__init__.py": "",
        "sandbox/benchmarks/beta/prompt.py": "from sandbox.benchmarks.alpha.tools import T\n",
        "rollout/episodes.py": "def f():\n    from sandbox.benchmarks import get_benchmark\n",
        "rollout/record.py": "from sandbox.himap.kinds import Role\n",
        "rollout/run.py": "from sandbox.benchmarks.alpha import tools\n",
        "rollout/agents/__init__.py": "",
        "rollout/agents/team.py": "from sandbox.himap import session\n",
        "b2tjax/task.py": "def f():\n    from sandbox.benchmarks.beta import prompt\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert layering_violations(import_graph(tmp_path)) == [
        "b2tjax.task imports sandbox.benchmarks.beta.prompt",
        "rollout.record imports sandbox.himap.kinds",  # the generic engine knows no agent
        "rollout.run imports sandbox.benchmarks.alpha.tools",  # nor a benchmark
        "sandbox.benchmarks.beta.prompt imports sandbox.benchmarks.alpha.tools",
        "sandbox.env imports sandbox.benchmarks.base",
        "sandbox.himap.session imports sandbox.benchmarks.alpha.world",
    ]


def test_sandbox_imports_no_jax():
    """Importing every sandbox module in a fresh interpreter leaves jax and flax unloaded."""
    modules = [m for m in _module_files(ROOT) if m.split(".")[0] == "sandbox"]
    code = (
        f"import importlib, sys\nfor m in {modules!r}:\n    importlib.import_module(m)\n"
        "print(sorted(m for m in ('jax', 'flax', 'jaxlib') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"
