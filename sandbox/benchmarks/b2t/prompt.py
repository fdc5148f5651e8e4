"""The B2T agent prompt (SPEC.md section 6, the paper's Figure 11) as chat messages + tool schemas.

Layout: a system message (role, memory module, answer format; rollout renders it with Qwen3's chat
template, which appends the tool schemas in its native `# Tools` block, whose `<tool_call>` format
is the one the sandbox parser reads) and a user message (behavior trajectory, then instruction).
Switches: `memory=False` drops the memory module (ablation; `Prompt.memory` tells the episode's
environment to disable memory too), `variant="react"` is the plain ReAct prompting baseline (no
memory module, generic reason-act-observe guidance).

The behavior trajectory is compacted to fit `max_tokens`: the least informative events go first
(clicks before favorites before bookings -- noise behaviours are only ever clicks -- oldest first
within each kind), and a note says how many were left out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sandbox.benchmarks.base import BenchmarkError, Prompt, TokenCounter

VARIANTS = ("tool_agent", "react")
# Drop order: lower rank goes first.
_ACTION_RANK = {"click": 0, "add_to_favorites": 1, "favorite": 1, "book": 2}

ROLE = (
    "You are a seasoned travel planner with long experience in personalised trip planning. "
    "Understand the user's needs -- including the preferences their past behaviour on our travel "
    "platform reveals, which they will not state -- gather facts by calling tools, and design a "
    "thorough, feasible travel plan."
)

MEMORY_MODULE = (
    "You have an internal key-value memory for storing and retrieving key information "
    "across turns. Wrap each memory operation in <memory></memory> as JSON: "
    '{"action": "write", "key": "...", "value": ...} stores a value, '
    '{"action": "read", "key": "..."} (or "key": "all") reads it back.'
)

ACTION_FORMAT = (
    "Each turn: think briefly inside <think></think>, then act. Call tools with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>; several calls in one turn run '
    "in parallel. Results come back in the next message. Never guess facts (trains, "
    "flights, prices, opening hours, places): look them up."
)

REACT_GUIDANCE = (
    "Work in a loop of reasoning and acting: think about what you still need inside "
    "<think></think>, call one or more tools with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>, read the observations '
    "that come back, and repeat until you can write the plan."
)

ANSWER_FORMAT = (
    "When you have gathered everything, write the complete plan between <answer> and </answer>, "
    "alone in its turn: a JSON list with one object per travel day, every day of the trip, in order. "
    'Each day: {"day": 1, "date": "YYYY-MM-DD", "city": ..., "weather": {"condition": ..., '
    '"max_temp": ..., "min_temp": ...}, "city_info": ..., "activities": [...]}. Each activity has a '
    '"type" in intercity_transport, meal, attraction, entertainment, hotel, a "name" (or for '
    'intercity transport "mode" train|flight, "number", "from_city", "to_city", "seat_class"), '
    '"start_time" and "end_time" (HH:MM), "price" (total for the whole party in CNY), and for local '
    'moves a "transport" {"mode", "duration_min", "distance_km"}; meals also give "meal" '
    "(breakfast, lunch or dinner). Add a description and tips where useful. Day 1 starts with the "
    "outbound trip, the last day ends with the return, and every other day ends with a hotel "
    "check-in. Keep the total within the budget."
)


def format_event(event: dict[str, Any]) -> str:
    """One behavior event as a compact line: time, session, action, POI and its details."""
    details = event.get("details") or {}
    # Sorted keys: the same event reads the same whether it comes from the generator or a JSONL file
    # (SFT traces are framed from the former, rollouts from the latter).
    detail_text = (
        json.dumps(details, ensure_ascii=False, separators=(",", ":"), sort_keys=True) if details else ""
    )
    parts = [
        str(event.get("timestamp", "")),
        f"session {event.get('session', '?')}",
        str(event.get("action", "")).upper(),
        str(event.get("poi_type", "")),
        f"{event.get('poi_name', '')} ({event.get('poi_id', '')})",
    ]
    return " | ".join(parts) + (f" | {detail_text}" if detail_text else "")


def _drop_order(trajectory: Sequence[dict[str, Any]]) -> list[int]:
    """Event indices in the order they are dropped: clicks, then favorites, then bookings; oldest first."""
    return sorted(
        range(len(trajectory)), key=lambda i: (_ACTION_RANK.get(str(trajectory[i].get("action")), 0), i)
    )


def _trajectory_text(trajectory: Sequence[dict[str, Any]], dropped: set[int]) -> str:
    lines = [format_event(e) for i, e in enumerate(trajectory) if i not in dropped]
    if dropped:
        kinds: dict[str, int] = {}
        for i in dropped:
            kinds[str(trajectory[i].get("action"))] = kinds.get(str(trajectory[i].get("action")), 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        lines.insert(0, f"[{len(dropped)} less informative events omitted to fit the context: {summary}]")
    return "\n".join(lines) if lines else "(no recorded behavior)"


def _system_text(variant: str, memory: bool) -> str:
    if variant == "react":
        return "\n\n".join([ROLE, REACT_GUIDANCE, ANSWER_FORMAT])
    parts = [ROLE, MEMORY_MODULE if memory else "", ACTION_FORMAT, ANSWER_FORMAT]
    return "\n\n".join(p for p in parts if p)


def _messages(
    instance: dict[str, Any], variant: str, memory: bool, dropped: set[int]
) -> list[dict[str, str]]:
    trajectory = instance.get("trajectory") or []
    user = (
        f"Behavior trajectory (oldest first):\n{_trajectory_text(trajectory, dropped)}\n\n"
        f"Instruction: {instance['instruction']}"
    )
    return [{"role": "system", "content": _system_text(variant, memory)}, {"role": "user", "content": user}]


def build_prompt(
    instance: dict[str, Any],
    tool_schemas: Sequence[dict[str, Any]] | None,
    *,
    max_tokens: int | None = None,
    count_tokens: TokenCounter | None = None,
    memory: bool = True,
    variant: str = "tool_agent",
) -> Prompt:
    """The agent prompt for one visible instance (keys `instruction`, `trajectory`).

    With `max_tokens` (needs `count_tokens`), trajectory events are dropped until the rendered
    prompt fits; BenchmarkError if even the prompt without any event does not fit.
    """
    if variant not in VARIANTS:
        raise BenchmarkError(f"unknown prompt variant {variant!r}; choose from {VARIANTS}")
    if "instruction" not in instance:
        raise BenchmarkError(f"instance {instance.get('id', '?')!r} has no 'instruction'")
    memory = memory and variant == "tool_agent"
    tools = list(tool_schemas) if tool_schemas else None
    trajectory = instance.get("trajectory") or []

    def make(num_dropped: int) -> Prompt:
        dropped = set(_drop_order(trajectory)[:num_dropped])
        return Prompt(_messages(instance, variant, memory, dropped), tools, memory, num_dropped)

    if max_tokens is None:
        return make(0)
    if count_tokens is None:
        raise BenchmarkError("build_prompt(max_tokens=...) needs count_tokens to measure the prompt")

    def fits(prompt: Prompt) -> bool:
        return count_tokens(prompt) <= max_tokens

    if fits(full := make(0)):
        return full
    if not fits(make(len(trajectory))):
        raise BenchmarkError(
            f"the prompt of {instance.get('id', '?')!r} exceeds {max_tokens} tokens "
            "even without its behavior trajectory"
        )
    lo, hi = 1, len(trajectory)  # smallest number of dropped events that fits (monotone)
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(make(mid)):
            hi = mid
        else:
            lo = mid + 1
    return make(lo)
