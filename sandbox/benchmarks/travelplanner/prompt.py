"""The TravelPlanner agent prompt as chat messages (SPEC.md section 9), in both official modes.

- two-stage: the agent gathers facts with the tools (sandbox.benchmarks.travelplanner.tools); the system
  message describes the memory module (the official NotebookWrite's role), the action format
  and the plan format; the user message is the query.
- sole-planning: the reference information is rendered into the user message before the query
  and there are no tools: the agent answers in its first turn.
Variants as in B2T: "b2t" is the framework's prompt (memory module when `memory`), "react" the plain
reason-act-observe baseline without memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sandbox.benchmarks.base import BenchmarkError, Prompt, TokenCounter

MODES = ("two-stage", "sole-planning")
VARIANTS = ("tool_agent", "react")

ROLE = (
    "You are an experienced travel planner for trips between US cities. Read the traveller's query, "
    "find real options, and write a complete itinerary that meets every requirement they state "
    "and stays within their budget."
)
MEMORY_MODULE = (
    "You have a key-value memory (your notebook) for keeping what you found across turns. "
    "Wrap each operation in <memory></memory> as JSON: "
    '{"action": "write", "key": "...", "value": ...} stores a value, '
    '{"action": "read", "key": "..."} (or "key": "all") reads it back.'
)
ACTION_FORMAT = (
    "Each turn: think briefly inside <think></think>, then act. Call tools with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>; several calls in one turn run '
    "in parallel and their results come back in the next message. Never invent a flight, "
    "price or place: look it up."
)
REACT_GUIDANCE = (
    "Work in a loop of reasoning and acting: think about what you still need inside "
    "<think></think>, call one or more tools with "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>, read the observations '
    "that come back, and repeat until you can write the plan."
)
SOLE_GUIDANCE = (
    "Everything you may use is in the reference information below the query's heading; "
    "do not use anything else. Think inside <think></think>, then answer in this turn."
)
ANSWER_FORMAT = (
    "Write the plan between <answer> and </answer>, alone in its turn: a JSON list with one object per "
    'day of the trip, in order, each with the keys "days" (1, 2, ...), "current_city" (the city, or '
    '"from A to B" on a day you travel), "transportation" (a flight as "Flight Number: F0123456, from A '
    'to B, Departure Time: HH:MM, Arrival Time: HH:MM", a drive as the DistanceMatrix line starting '
    'with "Self-driving" or "Taxi", or "-"), "breakfast", "lunch", "dinner" and "accommodation" '
    '(each "Name, City" or "-") and "attraction" ("Name, City;" for each one, or "-"). Copy names '
    "exactly as listed. The trip starts and ends in the origin city; every day but the last needs an "
    "accommodation. Flights and meals are paid per person, rooms per room and cars per vehicle for "
    "the whole party (self-driving: one car per 5 people, taxi: one per 4): keep the total within the "
    "budget, never repeat a restaurant or an attraction, and do not mix self-driving with flights or "
    "taxis."
)


def _system(mode: str, variant: str, memory: bool) -> str:
    if mode == "sole-planning":
        return "\n\n".join([ROLE, SOLE_GUIDANCE, ANSWER_FORMAT])
    if variant == "react":
        return "\n\n".join([ROLE, REACT_GUIDANCE, ANSWER_FORMAT])
    return "\n\n".join(p for p in (ROLE, MEMORY_MODULE if memory else "", ACTION_FORMAT, ANSWER_FORMAT) if p)


def build_prompt(
    query_text: str,
    tool_schemas: Sequence[dict[str, Any]] | None,
    *,
    mode: str = "two-stage",
    reference_text: str | None = None,
    variant: str = "tool_agent",
    memory: bool = True,
    max_tokens: int | None = None,
    count_tokens: TokenCounter | None = None,
) -> Prompt:
    """The prompt of one query. Sole-planning needs `reference_text`; BenchmarkError when the
    prompt exceeds `max_tokens` (the query and reference information are never cut)."""
    if variant not in VARIANTS:
        raise BenchmarkError(f"unknown prompt variant {variant!r}; choose from {VARIANTS}")
    if mode not in MODES:
        raise BenchmarkError(f"unknown TravelPlanner mode {mode!r}; choose from {MODES}")
    memory = memory and variant == "tool_agent" and mode == "two-stage"
    if mode == "sole-planning":
        if reference_text is None:
            raise BenchmarkError("sole-planning needs the query's reference information")
        user = f"Reference information:\n{reference_text}\n\nQuery: {query_text}"
        tools = None
    else:
        user = f"Query: {query_text}"
        tools = list(tool_schemas) if tool_schemas else None
    prompt = Prompt(
        [{"role": "system", "content": _system(mode, variant, memory)}, {"role": "user", "content": user}],
        tools,
        memory,
    )
    if max_tokens is not None:
        if count_tokens is None:
            raise BenchmarkError("a prompt token limit needs a token counter")
        if count_tokens(prompt) > max_tokens:
            raise BenchmarkError(
                f"the TravelPlanner prompt ({mode}) exceeds {max_tokens} tokens; raise the prompt limit"
            )
    return prompt
