"""The lines above a run's closing evaluation table: what was measured, and what it cannot mean.

A table of zeros reads as "no action errors" unless it says that every episode was cut at a length
cap before it could act, and a tiny model's table reads as a failed run unless it says what such a
model can show. Both notes are printed only when they apply.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from b2tjax.tasks.scoring import length_truncated_share
from b2tjax.tasks.verdicts import Tally
from rollout.record import EpisodeRecord, stop_reason_counts

# Below this many parameters a model shows that the pipeline runs, not that it plans.
SMALL_MODEL_PARAMS = 100_000_000


def model_params(model: Any) -> int | None:
    """The parameter count of a Qwen3 model (None for a model without a Qwen3 config)."""
    config = getattr(model, "config", None)
    return config.num_params() if hasattr(config, "num_params") else None


def evaluation_header(
    title: str,
    metrics: dict[str, Any],
    records: Sequence[EpisodeRecord],
    caps: str,
    num_params: int | None,
    tally: Tally | None = None,
) -> str:
    """`title; mean reward, action error rate, truncated share, by length (stop reasons)` and the notes
    that apply (by length: cut at rollout.max_seq_len, the episode did not fit the context);
    `caps` names the length limits in the recipe's terms ("rollout.max_turn_tokens=48, ..."); `tally`
    counts the verdicts the table below is made of, so the tiny-model note says what was measured
    rather than what to expect."""
    truncated = sum(r.truncated for r in records)
    share = truncated / len(records) if records else 0.0
    figures = [f"mean reward {metrics.get('mean_reward', 0.0):.3f}"]
    if "action_error_rate" in metrics:
        figures.append(f"action error rate {metrics['action_error_rate']:.3f}")
    by_length = length_truncated_share(records)  # at rollout.max_seq_len: the episode did not fit
    figures.append(
        f"truncated {share:.0%}, by length {by_length:.0%} (stop reasons: {stop_reason_counts(records)})"
    )
    lines = [f"{title}; " + ", ".join(figures)]
    if truncated:
        lines.append(
            f"note: {truncated} of {len(records)} episodes hit a length cap ({caps}) before answering; "
            "they stopped early, so their reward and action error rate do not say how well they act"
        )
    if num_params is not None and num_params < SMALL_MODEL_PARAMS:
        measured = f" (here: {tally.line()})" if tally is not None else ""
        lines.append(
            f"note: a {num_params / 1e6:.2f}M-parameter model shows that the pipeline runs end to end, "
            f"not that the model can plan trips{measured}. docs/results/tiny-cpu.md shows what GRPO changes "
            "at this size (the first-turn action error rate) and which recipe reproduces the papers"
        )
    return "\n".join(lines)
