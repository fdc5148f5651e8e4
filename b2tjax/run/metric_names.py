"""Every name a run logs (OUT/metrics.jsonl, TensorBoard, W&B) and what it means: one table.

docs/reference/metrics.md is generated from it (b2tjax.cli.reference). MetricsWriter warns
(`UndocumentedMetric`) on a logged name the table lacks, and the test suite turns that warning into
an error (pyproject.toml), so every run a test makes checks its names: a new metric cannot ship
without its meaning. A `*` matches one name part or more: a role, a constraint code, a HiMAP phase.
"""

from __future__ import annotations

import fnmatch
import warnings
from collections.abc import Iterable
from dataclasses import dataclass


class UndocumentedMetric(UserWarning):
    """A run logged a name that METRICS does not explain."""


@dataclass(frozen=True)
class Metric:
    name: str  # the key in a metrics.jsonl row; `*` matches any name part
    phase: str  # the steps that log it (a heading of the reference page)
    meaning: str


_TRAIN = "every train step (phase sft and grpo)"
_MOE = "every train step of a Qwen3-MoE model (means over its MoE layers; a dense model logs none)"
_GRPO = "GRPO steps (phase grpo)"
_ENGINE = "GRPO steps, the rollout engine (summed over processes)"
_STREAM = "GRPO steps, streaming (rollout.max_staleness > 0)"
_HIMAP = "GRPO steps and evaluation, HiMAP teams (agent: himap)"
_EVAL = "final evaluation (phase eval)"

METRICS: tuple[Metric, ...] = (
    Metric(
        "loss",
        _TRAIN,
        "the step's loss: SFT token-mean negative log-likelihood; GRPO clipped surrogate (+ beta "
        "x KL) under grpo.aggregation",
    ),
    Metric("grad_norm", _TRAIN, "global gradient norm before clipping at optim.max_grad_norm"),
    Metric("lr", _TRAIN, "learning rate of the step (warmup then cosine decay)"),
    Metric(
        "applied",
        _TRAIN,
        "1 when the optimizer update was applied, 0 when a non-finite loss or gradient skipped it",
    ),
    Metric("skipped", _TRAIN, "optimizer updates skipped so far (non-finite loss or gradient)"),
    Metric("entropy", _TRAIN, "mean token entropy of the policy over the trained tokens"),
    Metric("rows", _TRAIN, "rows computed per pass over the step's data (padded or packed)"),
    Metric("useful_token_share", _TRAIN, "real tokens / tokens computed: what padding costs (1 = none)"),
    Metric(
        "tokens_per_s",
        _TRAIN,
        "tokens of the step's records (GRPO) or traces (SFT) per wall-clock second",
    ),
    Metric("step_time_s", _TRAIN, "wall-clock seconds of the whole step"),
    Metric(
        "router/load_balance_loss",
        _MOE,
        "Switch load-balance loss E x sum_e f_e P_e over the valid tokens (k when balanced); added to "
        "the loss times model.moe.load_balance_loss_weight",
    ),
    Metric(
        "router/expert_load_max",
        _MOE,
        "pairs routed to the busiest expert / a balanced router's (tokens x k / E); 1 = balanced",
    ),
    Metric("router/expert_load_min", _MOE, "the same for the least used expert (0: an expert got no token)"),
    Metric("router/expert_load_cv", _MOE, "std / mean of the pairs routed to each expert (0 = balanced)"),
    Metric(
        "router/dropped_share",
        _MOE,
        "share of the valid tokens' k slots not routed to an expert, measured (routed pairs vs tokens x k): "
        "0, the experts are dropless",
    ),
    Metric("router/entropy", _MOE, "mean entropy (nats) of the router softmax over the valid tokens"),
    Metric("reward", _GRPO, "mean episode reward (each episode counted once, a HiMAP team's too)"),
    Metric("reward_std", _GRPO, "standard deviation of the episode rewards"),
    Metric(
        "groups_all_equal",
        _GRPO,
        "share of prompt groups whose rewards are all equal: their advantages are 0, nothing to learn",
    ),
    Metric("records", _GRPO, "token records in the rollout batch (one per stream; a HiMAP team has several)"),
    Metric("episodes", _GRPO, "episodes in the rollout batch (prompts_per_step x group_size)"),
    Metric(
        "adv_mean/*",
        _GRPO,
        "mean advantage of the records of one role (agent; HiMAP: coordinator, executor)",
    ),
    Metric("trained_records", _GRPO, "records kept by grpo.drop_flat_groups (groups whose rewards differ)"),
    Metric("clip_frac", _GRPO, "share of trained tokens whose ratio was clipped"),
    Metric("kl", _GRPO, "k3 KL to the frozen reference per token (0 unless grpo.beta > 0)"),
    Metric("ratio_mean", _GRPO, "mean importance ratio pi / pi_old over the trained tokens"),
    Metric(
        "logprob_gap_mean",
        _GRPO,
        "mean |trainer - sampler| log-prob of the sampled tokens, before the update (numerics, not learning)",
    ),
    Metric("logprob_gap_max", _GRPO, "largest such gap of a token"),
    Metric("response_tokens", _GRPO, "mean sampled (trained) tokens per record"),
    Metric(
        "padded_share",
        _GRPO,
        "share of rows that are padding rows (a batch not divisible by the micro-batch)",
    ),
    Metric(
        "final_pass",
        _GRPO,
        "share of episodes whose plan passes every constraint (the benchmark's headline)",
    ),
    Metric("delivery", _GRPO, "share of episodes that delivered a readable plan"),
    Metric("micro_pass_c", _GRPO, "B2T: commonsense constraints passed / checked, over all episodes"),
    Metric("micro_pass_upc", _GRPO, "B2T: personalization (UPC) constraints passed / checked"),
    Metric("commonsense_micro", _GRPO, "TravelPlanner: commonsense constraints passed / checked"),
    Metric("hard_micro", _GRPO, "TravelPlanner: hard constraints passed / checked"),
    Metric("r_format", _GRPO, "mean R_format: 1 when the answer is a readable plan"),
    Metric("p_action", _GRPO, "mean P_action: -1 for an episode with a failed tool call or malformed turn"),
    Metric(
        "action_error_rate",
        _GRPO,
        "share of episodes with a failed tool / memory call or malformed turn",
    ),
    Metric("truncated_rate", _GRPO, "share of streams cut by any cap (turns, turn tokens, length)"),
    Metric("length_truncated_rate", _GRPO, "share of streams cut at rollout.max_seq_len alone"),
    Metric("turns", _GRPO, "mean assistant turns per stream (per segment of a folded context)"),
    Metric("segments", _GRPO, "mean records per stream: 1 + its context folds (rollout.context_budget)"),
    Metric("peak_context_tokens", _GRPO, "the longest record's tokens: the largest context a turn saw"),
    Metric("accuracy", _GRPO, "task toy: share of rollouts that answered the digit"),
    Metric("success", _GRPO, "lookup task (tests): share of episodes answered right"),
    Metric("lookup_rate", _GRPO, "lookup task (tests): share of episodes that called the tool"),
    Metric("answered", _GRPO, "lookup task (tests): share of episodes that ended with an answer"),
    Metric("samples", _GRPO, "records trained on so far, over all GRPO steps"),
    Metric(
        "rollout_time_s",
        _GRPO,
        "wall-clock seconds of the step's rollout (waiting for it, when streaming)",
    ),
    Metric("update_time_s", _GRPO, "wall-clock seconds of the step's update"),
    Metric("rollout/generated_tokens", _ENGINE, "tokens the sampler generated in the step's rollout"),
    Metric("rollout/prefill_tokens", _ENGINE, "tokens the sampler prefilled (prompts and replies)"),
    Metric("rollout/reused_tokens", _ENGINE, "prefix tokens copied from another row instead of prefilled"),
    Metric("rollout/reprefill_tokens", _ENGINE, "tokens prefilled again after a stream was parked"),
    Metric("rollout/parks", _ENGINE, "streams parked (their row given to another) and resumed later"),
    Metric("rollout/folds", _ENGINE, "contexts folded to rollout.context_budget (new segments started)"),
    Metric("rollout/folded_tokens", _ENGINE, "context tokens those folds replaced by stubs"),
    Metric(
        "rollout/row_occupancy", _ENGINE, "generated tokens / (decode steps x rows): how full the rows ran"
    ),
    Metric("hosts/episodes_p*", _ENGINE, "episodes process N drove (several processes)"),
    Metric("hosts/tool_calls_p*", _ENGINE, "tool calls in the records of the episodes process N drove"),
    Metric("hosts/tool_runs_p*", _ENGINE, "tool calls process N's environments executed"),
    Metric("hosts/answered_p*", _ENGINE, "response blocks process N's environments wrote"),
    Metric(
        "staleness/*",
        _STREAM,
        "share of the step's records that are k weight updates old (k = 0 .. max_staleness)",
    ),
    Metric("staleness_mean", _STREAM, "mean age of the step's records in weight updates"),
    Metric("staleness_max", _STREAM, "oldest record's age in weight updates"),
    Metric("is_weight_mean", _STREAM, "mean truncated importance weight of the trained tokens"),
    Metric("is_weight_max", _STREAM, "largest importance weight before the cap grpo.is_cap"),
    Metric("is_capped_share", _STREAM, "share of trained tokens whose weight hit grpo.is_cap"),
    Metric("decode_ahead_time_s", _STREAM, "seconds the next step's episodes decoded during this update"),
    Metric("decode_wait_time_s", _STREAM, "seconds the step waited for that decoding to stop"),
    Metric("rounds", _HIMAP, "mean bargaining rounds per team episode"),
    Metric("fallback_days", _HIMAP, "mean days per episode the coordinator planned itself (fallback)"),
    Metric("streams", _HIMAP, "mean streams (coordinator + executors) per episode"),
    Metric("rejections/*", _HIMAP, "mean sub-goal rejections per episode, by reason code"),
    Metric("sigma_rejections/*", _HIMAP, "mean commits the global state refused per episode, by reason code"),
    Metric("phase_s/*", _HIMAP, "mean seconds per episode in one phase of the protocol"),
    Metric("tokens/*", _HIMAP, "mean sampled tokens per episode of one role"),
    Metric("context/*", _HIMAP, "mean prompt and environment tokens per episode of one role"),
    Metric(
        "eval/*",
        _EVAL,
        "the final evaluation's metrics (eval.json, flattened with /): the benchmark's pass "
        "rates, mean_reward and the episode rates above; in metrics.jsonl a row of phase eval "
        "holds them by their own names",
    ),
)


def undocumented(names: Iterable[str], phase: str = "") -> list[str]:
    """The logged keys no METRICS entry matches (`step`, `phase`, `time` frame every row); an eval
    row's keys are matched as TensorBoard names them, `eval/<key>`."""
    frame = {"step", "phase", "time"}
    prefix = "eval/" if phase == "eval" else ""
    return sorted(
        n for n in set(names) - frame if not any(fnmatch.fnmatchcase(prefix + n, m.name) for m in METRICS)
    )


def warn_undocumented(names: Iterable[str], phase: str = "") -> None:
    """One UndocumentedMetric per name the table lacks (Python shows each message once)."""
    for name in undocumented(names, phase):
        warnings.warn(
            f"metric {name!r} has no entry in b2tjax/run/metric_names.py (docs/reference/metrics.md)",
            UndocumentedMetric,
            stacklevel=3,
        )
