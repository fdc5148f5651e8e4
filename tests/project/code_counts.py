"""The weight of the code, counted: how many structural knobs a recipe has, who reads the whole
training config, where processes agree, and which rooms of b2tjax/ import upward.

    python tests/project/code_counts.py        # prints the table docs/ARCHITECTURE.md quotes

Structural knobs are the config keys that select an implementation (not a size or a rate); the
list below names every one the project has had, and a knob counts while the schema still has it.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STRUCTURAL_KNOBS = (
    "rollout.kv_cache",
    "rollout.refill",
    "rollout.reprefill",
    "rollout.async_host",
    "rollout.max_staleness",
    "rollout.decode_during_update",
    "rollout.resume_kv",
    "grpo.packing",
    "sft.packing",
    "mesh.rollout_devices",
    "model.lora.rank",
    "model.lora.quant",
    "agent",
    "task",
)
# Rooms of b2tjax/ from the bottom up: a room imports only rooms before it.
ROOMS = ("errors", "data", "step", "grpo", "sft", "config", "tasks", "report", "run", "plan", "cli")
# Where the whole TrainConfig may be read: the launch scripts and the rooms that resolve it.
CONFIG_READERS = ("launch", "b2tjax/cli", "b2tjax/config", "b2tjax/plan", "b2tjax/run")
# The cross-process primitives; only the orchestrator's one agreement per step may call them.
COLLECTIVES = ("agree_on_maximum", "agree", "gather_objects", "process_allgather", "sync_global_devices")
ORCHESTRATOR = ("b2tjax/run/",)
COLLECTIVE_HOMES = ("rollout/hosts.py",)  # where the primitives are defined


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def schema_keys() -> set[str]:
    """Every dotted key of TrainConfig (nested sections included)."""
    sys.path.insert(0, str(ROOT))
    from b2tjax.config import TrainConfig

    def walk(cls: type, prefix: str) -> set[str]:
        keys = set()
        for f in dataclasses.fields(cls):
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
            keys.add(prefix + f.name)
            if dataclasses.is_dataclass(default):
                keys |= walk(type(default), f"{prefix}{f.name}.")
        return keys

    return walk(TrainConfig, "")


def config_importers() -> list[str]:
    """Modules outside CONFIG_READERS that import TrainConfig."""
    found = []
    for path in _modules("b2tjax", "rollout", "models", "sandbox"):
        if _rel(path).startswith(CONFIG_READERS):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name == "TrainConfig" for a in node.names):
                found.append(_rel(path))
    return sorted(set(found))


def collective_calls() -> list[str]:
    """Calls of a cross-process primitive outside the orchestrator and the primitives' home."""
    found = []
    for path in _modules("b2tjax", "rollout", "models"):
        rel = _rel(path)
        if rel.startswith(ORCHESTRATOR + COLLECTIVE_HOMES):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in COLLECTIVES:
                    found.append(f"{rel}:{node.lineno} {name}")
    return found


def upward_imports() -> list[str]:
    """Imports from a b2tjax room to a room above it (ROOMS order)."""
    found = set()
    for path in _modules("b2tjax"):
        parts = path.relative_to(ROOT / "b2tjax").parts
        room = parts[0].removesuffix(".py")
        if room not in ROOMS:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module] if isinstance(node, ast.ImportFrom) and node.module else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                other = name.split(".")[1] if name.startswith("b2tjax.") else None
                if other in ROOMS and ROOMS.index(other) > ROOMS.index(room):
                    found.add(f"{room} -> {other}")
    return sorted(found)


def code_lines(*folders: str) -> int:
    return sum(p.read_text().count("\n") for p in _modules(*folders))


def counts() -> dict[str, object]:
    keys = schema_keys()
    return {
        "structural knobs": [k for k in STRUCTURAL_KNOBS if k in keys],
        "modules importing TrainConfig outside the config readers": config_importers(),
        "cross-process calls outside the orchestrator": collective_calls(),
        "upward imports inside b2tjax/": upward_imports(),
        "lines of b2tjax/ + rollout/": code_lines("b2tjax", "rollout"),
    }


def main() -> None:
    for name, value in counts().items():
        if isinstance(value, list):
            print(f"{name}: {len(value)}" + (f" ({', '.join(value)})" if value else ""))
        else:
            print(f"{name}: {value:,}")


if __name__ == "__main__":
    main()
