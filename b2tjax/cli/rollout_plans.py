"""The plans inside a rollouts file (`launch/rollouts.py --out`), for `launch/eval.py --records`.

A rollouts file holds one line per stream, not `{"id", "plan"}` lines: a single agent's episode is
one stream whose `answer` is the plan; a HiMAP team episode is several streams (coordinator and day
executors) whose merged plan is the coordinator's answer (a flat team's: on the stream that ended
it). A stream given twice (the same `stream` of one episode, or a second agent / coordinator
stream) is refused: which line counts would be a guess. Kept free of JAX imports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from b2tjax.errors import UserError
from sandbox.himap.kinds import Role
from sandbox.jsonl import read_jsonl_objects
from sandbox.types import StopReason


def plans_from_rollouts(path: Path) -> dict[str, Any]:
    """instance id -> plan (the answer text; None when the episode gave none) of every episode in
    the file; UserError naming the line for a line that is not a rollout record, or naming the
    instance when it has more than one episode (which one to score is the user's choice)."""
    plans: dict[str, Any] = {}
    episode_of: dict[str, Any] = {}
    line_of: dict[tuple[str, str], int] = {}  # (instance, stream or answering role) -> its line
    led: set[str] = set()  # instances whose agent or coordinator gave the answer
    for number, row in read_jsonl_objects(path, UserError):
        ident = row.get("instance_id")
        if not isinstance(ident, str) or "answer" not in row:
            raise UserError(
                f"{path}:{number}: not a rollout record (expected 'instance_id' and 'answer', as "
                "launch/rollouts.py writes); a plans file goes to --plans"
            )
        episode = row.get("episode", 0)
        if episode_of.setdefault(ident, episode) != episode:
            raise UserError(f"{path}: instance {ident!r} has more than one episode; keep one per instance")
        role = row.get("role", Role.AGENT)
        segment = f" segment {row['segment']}" if row.get("segment") else ""  # a folded context's
        keys = [(ident, f"stream {row.get('stream', 'main')!r}{segment}")]
        if role in (Role.AGENT, Role.COORDINATOR):  # the episode's one answering stream
            keys.append((ident, f"{role} stream{segment}"))
        for key in keys:
            if key in line_of:
                raise UserError(
                    f"{path}:{number}: instance {ident!r} has a second {key[1]} in its episode "
                    f"(first on line {line_of[key]}); keep one line per stream"
                )
            line_of[key] = number
        # a team's answer rides on its coordinator, or in a flat team (no coordinator) on the stream
        # that ended the episode by answering; an executor's day answer alone delivers no plan; a
        # stream's segments come in order, its last one holding the answer
        if role in (Role.AGENT, Role.COORDINATOR) and (role == Role.AGENT or row["answer"] is not None):
            plans[ident] = row["answer"]
            led.add(ident)
        elif ident not in led and row["answer"] is not None and row.get("stop_reason") == StopReason.ANSWER:
            plans[ident] = row["answer"]
        else:
            plans.setdefault(ident, None)
    return plans
