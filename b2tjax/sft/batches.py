"""One SFT step's batch: tokenised traces laid out as the TrainBatches the step reads.

Unpacked (`sft.packing: false`), rows are padded to the step's longest trace (in a 64-token
bucket, at most `max_seq_len`), one [M, b, T] batch for the scanned step. Packed, the traces go
back to back into rows of `sft.row_tokens` (b2tjax/step/packing.py), each trace its own segment,
the rows cut into micro-batches of their own width (`sft.row_widths`; `micro_batch_size` then
counts rows), run one by one into one optimizer update (`StepFns.accumulate`) with the whole
batch's token count. Either way the mask keeps assistant tokens only (a trace's first token never:
it has no prediction from its own trace), `positions` lists them so the step projects the output
head only where the loss reads a log-prob, and the token-mean NLL is the same.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from b2tjax.config.schema import SFTConfig
from b2tjax.step.batch import TrainBatch, loss_positions, pad_length, stack_rows
from b2tjax.step.packing import Packing, pack_micro_batches, tokens_computed
from b2tjax.step.train_step import StepFns, TrainState


def sft_batch(rows: Sequence[dict], max_seq_len: int) -> TrainBatch:
    """The TrainBatch of SFT examples {"ids", "mask"} (traces longer than `max_seq_len` are cut)."""
    length = pad_length(min(max(len(r["ids"]) for r in rows), max_seq_len))
    mask = stack_rows([r["mask"] for r in rows], length, np.float32)
    mask[:, 0] = 0.0  # position 0 has no prediction
    ids = stack_rows([r["ids"] for r in rows], length, np.int32)
    return TrainBatch(ids=ids, mask=mask, positions=loss_positions(mask))


@dataclasses.dataclass(frozen=True)
class SFTStep:
    """One SFT step's micro-batched TrainBatches and its layout metrics (`rows` computed and
    `useful_token_share`, trace tokens over tokens computed). `masks` (packed only): each trace's
    own mask, for the whole batch's normaliser."""

    batches: list[TrainBatch]
    layout: dict[str, float]
    masks: list[np.ndarray] | None = None

    @property
    def tokens(self) -> int:
        """Tokens trained on (assistant tokens)."""
        return int(sum(b.mask.sum() for b in self.batches))

    def run(self, fns: StepFns, state: TrainState) -> tuple[TrainState, dict]:
        """The optimizer step: scanned (padded), or micro-batch by micro-batch (packed)."""
        if self.masks is None:
            return fns.sft_step(state, fns.shard_batch(self.batches[0]))
        return fns.accumulate(fns.sft_grad, state, self.batches, fns.normaliser(self.masks))


def sft_step_batch(rows: Sequence[dict], sft: SFTConfig, row_devices: int = 1) -> SFTStep:
    """One SFT step's batches under `sft` (packed or not) and their layout metrics."""
    if not sft.packing:
        micro = sft.batch_size // sft.micro_batch_size if sft.micro_batch_size else 1
        batch = sft_batch(rows, sft.max_seq_len)
        real = sum(min(len(r["ids"]), batch.ids.shape[1]) for r in rows)
        layout = {"rows": float(len(rows)), "useful_token_share": real / batch.ids.size}
        return SFTStep([batch.split(micro)], layout)
    ids = [np.asarray(r["ids"][: sft.max_seq_len], np.int32) for r in rows]
    masks = []
    for r, x in zip(rows, ids, strict=True):
        mask = np.asarray(r["mask"][: len(x)], np.float32)
        mask[0] = 0.0
        masks.append(mask)
    capacity = sft.row_tokens or pad_length(sft.max_seq_len)
    micro_rows = sft.micro_batch_size or sft.batch_size
    lengths = [len(x) for x in ids]
    micro_batches = pack_micro_batches(lengths, capacity, micro_rows, row_devices, sft.row_widths)
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
