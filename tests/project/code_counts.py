"""The weight of the code, counted: how many structural knobs a recipe has, who reads the whole
training config, where processes agree, and which rooms of b2tjax/ import upward.

    python tests/project/code_counts.py        # prints the table docs/ARCHITECTURE.md quotes

Structural knobs are the choices that select an implementation (not a size or a rate): the config
keys below, every one the project has had (a knob counts while the schema still has one of its
keys), and the number of processes, which is always a choice.
"""

from __future__ import annotations

import ast
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

STRUCTURAL_KNOBS = {  # knob -> its config keys
    "rollout.kv_cache": ("rollout.kv_cache",),
    "rollout.refill": ("rollout.refill",),
    "rollout.reprefill": ("rollout.reprefill",),
    "rollout.async_host": ("rollout.async_host",),
    # one streaming schedule: S > 0 streams, and only a streamed run reads the other two; resolved
    # once into b2tjax/run/streaming.py's StreamedRollouts (and its overlap with the update) and the
    # session's KV policy (rollout/session.py RESUME_KV)
    "rollout streaming": ("rollout.max_staleness", "rollout.decode_during_update", "rollout.resume_kv"),
    "grpo.packing": ("grpo.packing",),
    "sft.packing": ("sft.packing",),
    "mesh.rollout_devices": ("mesh.rollout_devices",),
    "LoRA / int8": ("model.lora.rank", "model.lora.quant"),
    "agent": ("agent",),
    "task": ("task",),
}
PROCESSES = "processes"
# Rooms of b2tjax/ from the bottom up (docs/ARCHITECTURE.md's table): a room imports only rooms before it.
ROOMS = ("errors", "config", "data", "step", "grpo", "sft", "tasks", "run", "report", "plan", "cli")
VOCABULARY = {"b2tjax.grpo.modes"}  # plain Literals that import nothing: any room may read them
# Where the whole TrainConfig may be read: the launch scripts and the rooms that resolve it.
CONFIG_READERS = ("launch", "b2tjax/cli", "b2tjax/config", "b2tjax/plan", "b2tjax/run")
# The cross-process primitives. In training code (b2tjax/) only the orchestrator (b2tjax/run/)
# calls them; the sampler's own lockstep (rollout/) is the engine's protocol, counted apart.
COLLECTIVES = ("agree_on_maximum", "agree", "gather_objects", "process_allgather", "sync_global_devices")
ORCHESTRATOR = ("b2tjax/run/",)


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


def collective_calls(*folders: str) -> list[str]:
    """Calls of a cross-process primitive in `folders`, outside the orchestrator."""
    found = []
    for path in _modules(*folders):
        rel = _rel(path)
        if rel.startswith(ORCHESTRATOR):
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
                if name in VOCABULARY:
                    continue
                if other in ROOMS and ROOMS.index(other) > ROOMS.index(room):
                    found.add(f"{room} -> {other}")
    return sorted(found)


def code_lines(*folders: str) -> int:
    return sum(p.read_text().count("\n") for p in _modules(*folders))


def counts() -> dict[str, object]:
    keys = schema_keys()
    return {
        "structural knobs": [k for k, ks in STRUCTURAL_KNOBS.items() if set(ks) & keys] + [PROCESSES],
        "modules importing TrainConfig outside the config readers": config_importers(),
        "cross-process calls in b2tjax/ outside the orchestrator": collective_calls("b2tjax"),
        "cross-process calls of the sampler and model loading (rollout/, models/)": collective_calls(
            "rollout", "models"
        ),
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
