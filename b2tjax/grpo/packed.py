"""The optimizer steps of a GRPO update on packed rows: records back to back in rows of a token budget.

Each seeded random mini-batch's records are packed first-fit-decreasing into rows of
`grpo.row_tokens`, the rows cut into micro-batches of the run's few shapes (`grpo.row_widths`;
b2tjax/step/packing.py `RowPolicy`; one record per row is the same packer at a one-token budget).
The loss reads each record as its own segment: per-token advantages, per-segment sequence counts,
attention within a segment; every micro-batch divides by the whole mini-batch's counts
(`loss.record_normaliser`) and their gradients add up in one buffer before one optimizer update
(`StepFns.accumulate`), so loss, gradients and metrics do not depend on which records share a row
(tests/b2tjax/test_packing_loss.py).

The old and reference log-prob passes run over all the step's records, packed the same way (one
call per micro-batch), and are taken back per record; each mini-batch then re-packs its records.
A streamed step (rollout.max_staleness > 0) takes its old log-probs and importance weights from
`offpolicy.ratio_anchor` over the records' tokens back to back (so the weights' metrics do not
depend on the rows either) and places the weights in the rows like the other per-token fields.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import numpy as np

from b2tjax.config.schema import GRPOConfig
from b2tjax.grpo import offpolicy
from b2tjax.step.batch import TrainBatch, loss_positions, pad_length
from b2tjax.step.packing import MicroBatch, Packing, RowPolicy, tokens_computed
from b2tjax.step.train_step import StepFns, TrainState
from rollout.record import EpisodeRecord

Fields = dict[str, list[np.ndarray]]  # per record, unpadded: ids, sampled, sampler_lp, mask, ...


def grpo_rows(g: GRPOConfig, rollout_batch: int, max_seq_len: int, row_devices: int) -> RowPolicy:
    """The rows of a GRPO step: `grpo.row_tokens`, or 0 = the recipe's sequence bucket, the row
    length launch/plan.py fits; rows per micro-batch `grpo.micro_batch_size`, or 0 = the
    mini-batch's records. No record is longer than `max_seq_len`, so the widest row holds it."""
    micro_rows = g.micro_batch_size or rollout_batch // g.mini_batches
    capacity = g.row_tokens or pad_length(max_seq_len)
    return RowPolicy(capacity, micro_rows, row_devices, g.row_widths, longest=max_seq_len)


def record_fields(loss_mask: bool, records: list[EpisodeRecord]) -> Fields:
    """Each record's tokens, sampler log-probs and masks, unpadded: `sampled` is the sampler's
    mask, `mask` what is trained (`grpo.loss_mask`: the sampled tokens; the ablation trains every
    token after the prompt, environment replies included); with router replay (records with
    routes) also `routes` (`record_routes`)."""
    out: Fields = {"ids": [], "sampled": [], "sampler_lp": [], "mask": []}
    if records and records[0].routes is not None:
        out["routes"] = [record_routes(r) for r in records]
    for r in records:
        n = len(r.ids)
        sampled = np.asarray(r.loss_mask, np.float32)[:n]
        if loss_mask:
            mask = sampled.copy()
        else:  # ablation: every token after the prompt, environment replies included
            mask = (np.arange(n) >= r.prompt_len).astype(np.float32)
        mask[0] = 0.0  # a record's first token has no prediction (in a packed row: not from its own)
        out["ids"].append(np.asarray(r.ids, np.int32))
        out["sampled"].append(sampled)
        out["sampler_lp"].append(np.asarray(r.logprobs, np.float32)[:n])
        out["mask"].append(mask)
    return out


def record_routes(record: EpisodeRecord) -> np.ndarray:
    """int16 [len(ids), L, k]: the record's routes, -1 on the tokens it has none for (appended after
    its last model call; the trainer's router routes them). A replay run's records all have routes."""
    if record.routes is None:
        raise ValueError(f"record {record.instance_id!r} has no routes in a router replay step")
    out = np.full((len(record.ids), *record.routes.shape[1:]), -1, np.int16)
    out[: len(record.routes)] = record.routes
    return out


def _placed_routes(fields: Fields, records, pack: Packing) -> np.ndarray | None:
    """The routes of `records` in `pack`'s rows (padding -1: unrouted anyway), or None without replay."""
    routes = fields.get("routes")
    return None if routes is None else pack.place([routes[i] for i in records], np.int16, fill=-1)


def logprob_pass(
    fns: StepFns, fields: Fields, micro_batches: list[MicroBatch]
) -> Callable[..., list[np.ndarray]]:
    """params -> each record's per-token log-probs under them (the old and reference passes),
    read where the sampler recorded one (the gap) or the loss trains; one call per micro-batch."""
    read = [np.maximum(s, m) * (np.arange(len(s)) > 0) for s, m in _pairs(fields)]
    inputs = []
    for mb in micro_batches:
        ids = mb.pack.place([fields["ids"][i] for i in mb.members], np.int32)
        positions = loss_positions(mb.pack.place([read[i] for i in mb.members], np.float32))
        placed = (*mb.pack.segments(), _placed_routes(fields, mb.members, mb.pack))
        segments = tuple(None if x is None else fns.shard_rows(x[None]) for x in placed)
        inputs.append((fns.shard_rows(ids[None]), fns.shard_rows(positions[None]), segments))

    def run(params) -> list[np.ndarray]:
        out: list[np.ndarray] = [np.zeros(0, np.float32)] * len(fields["ids"])
        lps = [fns.logprobs(params, *x) for x in inputs]  # dispatched before any is read back
        for mb, lp in zip(micro_batches, lps, strict=True):
            lp = np.asarray(lp).reshape(mb.pack.rows, mb.pack.width)  # replicated: all rows here
            for k, i in enumerate(mb.members):
                out[i] = mb.pack.take(lp, k)
        return out

    return run


def _pairs(fields: Fields):
    return zip(fields["sampled"], fields["mask"], strict=True)


def packed_batches(
    fields: Fields, members: np.ndarray, adv: np.ndarray, shape: RowPolicy
) -> tuple[list[TrainBatch], list[MicroBatch]]:
    """The [1, rows, width] TrainBatches of records `members`, packed (fields need old_lp, ref_lp,
    is_w)."""
    micro_batches = shape.pack([len(fields["ids"][i]) for i in members])
    return [_micro_batch(fields, members[mb.members], adv, mb.pack) for mb in micro_batches], micro_batches


def _micro_batch(fields: Fields, records: np.ndarray, adv: np.ndarray, pack: Packing) -> TrainBatch:
    """One micro-batch's TrainBatch: records `records` (in `pack`'s order) placed in its rows."""
    pick = lambda name: [fields[name][i] for i in records]  # noqa: E731
    mask = pack.place(pick("mask"), np.float32)
    segment_ids, token_positions = pack.segments()
    flat = TrainBatch(
        ids=pack.place(pick("ids"), np.int32),
        mask=mask,
        old_logprobs=pack.place(pick("old_lp"), np.float32),
        advantages=pack.place([float(adv[i]) for i in records], np.float32),
        ref_logprobs=None if fields.get("ref_lp") is None else pack.place(pick("ref_lp"), np.float32),
        is_weights=None if fields.get("is_w") is None else pack.place(pick("is_w"), np.float32, fill=1.0),
        positions=loss_positions(mask),
        segment_ids=segment_ids,
        token_positions=token_positions,
        routes=_placed_routes(fields, records, pack),
    )
    return flat.split(1)


def packed_update(
    g: GRPOConfig,
    policy: RowPolicy,
    fns: StepFns,
    state: TrainState,
    records: list[EpisodeRecord],
    adv: np.ndarray,
    seed: int,
    ref_params=None,
    before_update: Callable[[], None] = lambda: None,
    streamed: bool = False,
) -> tuple[TrainState, dict]:
    """Old/ref log-probs, then epochs x mini-batches optimizer steps, on the rows of `policy`; the
    update's metrics (the log-prob gap, the steps' means, rows per pass and the useful token
    share). `streamed`: the decoupled objective (`offpolicy.ratio_anchor`)."""
    n = len(records)
    if n < g.mini_batches:
        raise ValueError(f"a step with {n} records cannot fill grpo.mini_batches={g.mini_batches}")
    fields = record_fields(g.loss_mask, records)
    logprobs_of = logprob_pass(fns, fields, policy.pack([len(x) for x in fields["ids"]]))
    trainer_lp = logprobs_of(state.params)
    sampled = fields["sampled"]
    trained_tokens = float(sum(s.sum() for s in sampled))
    gaps = [np.abs(t - lp) * s for t, lp, s in zip(trainer_lp, fields["sampler_lp"], sampled, strict=True)]
    metrics = {
        "logprob_gap_mean": float(sum(x.sum() for x in gaps) / max(trained_tokens, 1.0)),
        "logprob_gap_max": float(max(x.max(initial=0.0) for x in gaps)),
        "response_tokens": trained_tokens / n,
    }
    anchor_metrics = _anchor(fields, trainer_lp, g, streamed)
    fields["ref_lp"] = logprobs_of(ref_params) if g.beta > 0 else None

    before_update()
    state, step_means = _optimize(fns, state, fields, adv, policy, g.mini_batches, g.epochs, seed)
    return state, {**metrics, **anchor_metrics, **step_means}


def _anchor(
    fields: Fields, trainer_lp: list[np.ndarray], grpo: GRPOConfig, streamed: bool
) -> dict[str, float]:
    """Sets each record's old log-probs and importance weights (`old_lp`, `is_w`: None unless
    streamed) from `offpolicy.ratio_anchor` over all the records' tokens back to back [1, tokens]
    (the same tokens in the same order, however the rows lie); returns the weights' metrics."""
    flat = lambda values: np.concatenate(values)[None]  # noqa: E731
    cuts = np.cumsum([len(x) for x in trainer_lp])[:-1]
    old, weights, metrics = offpolicy.ratio_anchor(
        grpo, streamed, flat(trainer_lp), flat(fields["sampler_lp"]), flat(fields["sampled"])
    )
    fields["old_lp"] = np.split(old[0], cuts)
    fields["is_w"] = None if weights is None else np.split(weights[0], cuts)
    return metrics


def _optimize(
    fns: StepFns,
    state: TrainState,
    fields: Fields,
    adv: np.ndarray,
    shape: RowPolicy,
    mini_batches: int,
    epochs: int,
    seed: int,
) -> tuple[TrainState, dict[str, float]]:
    """`epochs` passes in seeded random mini-batches (records dealt into `mini_batches` parts whose
    sizes differ by at most one), each an optimizer step over its micro-batches
    (`StepFns.accumulate`) dividing by the whole mini-batch's counts; the steps' mean metrics,
    the rows computed per pass and the useful share."""
    rng = np.random.default_rng(seed)
    sums: dict[str, float] = {}
    updates = rows = computed = 0
    n = len(fields["ids"])
    for _ in range(epochs):
        for members in np.array_split(rng.permutation(n), mini_batches):
            batches, micro_batches = packed_batches(fields, members, adv, shape)
            norm = fns.normaliser([fields["mask"][i] for i in members])
            state, step_metrics = fns.accumulate(fns.grpo_grad, state, batches, norm)
            for k, v in jax.device_get(step_metrics).items():
                sums[k] = sums.get(k, 0.0) + float(v)
            updates += 1
            rows += sum(mb.pack.rows for mb in micro_batches)
            computed += tokens_computed(micro_batches)
    real = epochs * sum(len(x) for x in fields["ids"])
    means = {k: v / updates for k, v in sums.items()}
    return state, {**means, "rows": rows / epochs, "useful_token_share": real / computed}
