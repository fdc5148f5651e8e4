"""One SFT step's batch: tokenised traces packed into the TrainBatches the step reads.

The traces go back to back into rows of `sft.row_tokens` (b2tjax/step/packing.py `RowPolicy`),
each trace its own segment, the rows cut into micro-batches of the run's few shapes (`sft.row_widths`;
`micro_batch_size` counts rows), run one by one into one optimizer update (`StepFns.accumulate`)
with the whole batch's token count. The mask keeps assistant tokens only (a trace's first token
never: it has no prediction from its own trace), and `positions` lists them, where the step reads
the output head.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from b2tjax.config.schema import SFTConfig
from b2tjax.step.batch import TrainBatch, loss_positions, pad_length
from b2tjax.step.packing import Packing, RowPolicy, tokens_computed
from b2tjax.step.train_step import StepFns, TrainState


def sft_rows(sft: SFTConfig, row_devices: int = 1) -> RowPolicy:
    """The rows of an SFT step: `sft.row_tokens`, or 0 = `sft.max_seq_len`'s 64-token bucket (the
    planned row); rows per micro-batch `sft.micro_batch_size`, or 0 = the batch's traces."""
    capacity = sft.row_tokens or pad_length(sft.max_seq_len)
    micro_rows = sft.micro_batch_size or sft.batch_size
    return RowPolicy(capacity, micro_rows, row_devices, sft.row_widths, longest=sft.max_seq_len)


@dataclasses.dataclass(frozen=True)
class SFTStep:
    """One SFT step's micro-batched TrainBatches, its layout metrics (`rows` computed and
    `useful_token_share`, trace tokens over tokens computed) and each trace's own mask, for the
    whole batch's normaliser."""

    batches: list[TrainBatch]
    layout: dict[str, float]
    masks: list[np.ndarray]

    @property
    def tokens(self) -> int:
        """Tokens trained on (assistant tokens)."""
        return int(sum(b.mask.sum() for b in self.batches))

    def run(self, fns: StepFns, state: TrainState) -> tuple[TrainState, dict]:
        """The optimizer step, micro-batch by micro-batch."""
        return fns.accumulate(fns.sft_grad, state, self.batches, fns.normaliser(self.masks))


def sft_step_batch(rows: Sequence[dict], max_seq_len: int, policy: RowPolicy) -> SFTStep:
    """One SFT step's batches in the rows of `policy` (traces cut to `max_seq_len` tokens) and
    their layout metrics."""
    ids = [np.asarray(r["ids"][:max_seq_len], np.int32) for r in rows]
    masks = []
    for r, x in zip(rows, ids, strict=True):
        mask = np.asarray(r["mask"][: len(x)], np.float32)
        mask[0] = 0.0
        masks.append(mask)
    lengths = [len(x) for x in ids]
    micro_batches = policy.pack(lengths)
    batches = [
        _packed([ids[i] for i in mb.members], [masks[i] for i in mb.members], mb.pack) for mb in micro_batches
    ]
    layout = {
        "rows": float(sum(mb.pack.rows for mb in micro_batches)),
        "useful_token_share": sum(lengths) / tokens_computed(micro_batches),
    }
    return SFTStep(batches, layout, masks)


def _packed(ids: list[np.ndarray], masks: list[np.ndarray], pack: Packing) -> TrainBatch:
    """One packed micro-batch's [1, rows, width] TrainBatch."""
    mask = pack.place(masks, np.float32)
    segment_ids, token_positions = pack.segments()
    batch = TrainBatch(
        ids=pack.place(ids, np.int32),
        mask=mask,
        positions=loss_positions(mask),
        segment_ids=segment_ids,
        token_positions=token_positions,
    )
    return batch.split(1)
