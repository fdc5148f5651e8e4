"""The scripted expert under a recipe's context budget: launch/eval.py --policy expert --config.

The expert acts on the environment as always (it keeps its own state, so folding never changes
what it does); each of its episodes is then laid out as the rollout engine would hold it under the
recipe's tokenizer, prompt options, `rollout.context_budget`, `rollout.context_keep_turns` and
`rollout.max_turn_tokens` (rollout/replay.py). Per episode: its segments, the largest context a
turn saw, the tokens trained over its segments against the episode's length without a budget,
whether it ended for lack of room (StopReason.CONTEXT_BUDGET: no answer, so it counts as
undelivered), and the plan's names its last context no longer shows (sandbox.expert_session.unseen).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

from rollout.config import RolloutConfig
from rollout.context import ContextBudget
from rollout.prompt import prompt_ids, token_counter
from rollout.replay import Replayed, replay
from sandbox.benchmarks import Benchmark, Instance
from sandbox.expert_session import ExpertResult, trace_replies, unseen


@dataclasses.dataclass
class BudgetFigures:
    """Per-episode figures of the expert under a budget (launch/eval.py prints and writes them)."""

    episodes: list[dict[str, Any]] = dataclasses.field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        """The keys launch/eval.py's --json adds beside the benchmark's metrics (some episodes held)."""
        runs, n = self.episodes, len(self.episodes)
        return {
            "peak_context_tokens": max(e["peak"] for e in runs),
            "mean_peak_context_tokens": sum(e["peak"] for e in runs) / n,
            "segments_per_episode": sum(e["segments"] for e in runs) / n,
            "trained_tokens_per_episode": sum(e["trained"] for e in runs) / n,
            "unfolded_tokens_per_episode": sum(e["unfolded"] for e in runs) / n,
            "context_budget_stops": sum(e["stopped"] for e in runs),
            "episodes_with_unseen_names": sum(bool(e["unseen"]) for e in runs),
        }

    def summary(self) -> str:
        m = self.metrics()
        peak, mean = m["peak_context_tokens"], m["mean_peak_context_tokens"]
        trained, unfolded = m["trained_tokens_per_episode"], m["unfolded_tokens_per_episode"]
        return (
            f"expert under the budget: {len(self.episodes)} episodes, peak context {peak:,} (mean "
            f"{mean:,.0f}), {m['segments_per_episode']:.2f} segments per episode, trained tokens "
            f"{trained:,.0f} per episode vs {unfolded:,.0f} unfolded, {m['context_budget_stops']} "
            f"stopped by the budget, {m['episodes_with_unseen_names']} answers naming what their "
            "context lost"
        )


def expert_under_budget(
    bench: Benchmark,
    pairs: Sequence[Instance],
    rollout: RolloutConfig,
    tokenizer: Any,
    figures: BudgetFigures,
) -> Iterator[tuple[str, str | None]]:
    """(id, answer) of the expert on each pair, None where it found no plan or where its episode
    under the budget ends before the answer; `figures` gets each solved episode's figures."""
    visible = {inst.id: inst.visible for inst in pairs}
    for key, result in bench.expert_results(pairs):
        if result is None or not result.ok:
            yield key, None
            continue
        run = episode_under_budget(bench, visible[key], result, rollout, tokenizer)
        figures.episodes.append(
            {
                "id": key,
                "segments": len(run.segments),
                "peak": run.peak,
                "trained": run.trained,
                "unfolded": run.unfolded,
                "live": round(run.live, 1),
                "stopped": run.stopped,
                "unseen": [] if run.stopped else unseen(bench.plan_names(result.plan), run.shown()),
            }
        )
        yield key, None if run.stopped else result.answer


def episode_under_budget(
    bench: Benchmark, visible: dict[str, Any], result: ExpertResult, rollout: RolloutConfig, tokenizer: Any
) -> Replayed:
    """One expert episode laid out as `rollout`'s records hold it: the benchmark's prompt under its
    prompt options, then the expert's turns and replies, folded under its context budget."""
    prompt = bench.prompt(
        visible,
        variant=rollout.prompt_style,
        memory=rollout.memory_enabled,
        max_tokens=rollout.prompt_budget,
        count_tokens=token_counter(tokenizer),
        python=rollout.python_tool,
    )
    ids = prompt_ids(prompt, tokenizer)
    return replay(
        ids, result.turns, result.replies, tokenizer, ContextBudget.of(rollout), rollout.max_turn_tokens
    )


def trace_under_budget(
    bench: Benchmark, visible: dict[str, Any], trace: dict[str, Any], rollout: RolloutConfig, tokenizer: Any
) -> Replayed:
    """One expert SFT trace ({"messages", "tools"}: DATA/sft) laid out as `rollout`'s records hold
    it: its own prompt (without the Python tool's schema when the run has none, as SFT encodes it),
    its turns, and the replies a fresh environment gives them again, folded under the budget."""
    from b2tjax.sft.traces import tools_offered
    from models.chat import encode_chat

    messages = trace["messages"]
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    tools = tools_offered(trace.get("tools"), rollout.python_tool)
    ids = encode_chat(tokenizer, messages[:first], tools, add_generation_prompt=True)
    replies = trace_replies(bench.world_for(visible), messages[first:])
    return replay(
        ids, messages[first:], replies, tokenizer, ContextBudget.of(rollout), rollout.max_turn_tokens
    )
