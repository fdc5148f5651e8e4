"""One SFT step's batch: tokenised traces laid out as the fixed-shape TrainBatch the step reads.

Unpacked (`sft.packing: false`), rows are padded to the step's longest trace (in a 64-token
bucket, at most `max_seq_len`). Packed, the traces go back to back into rows of `sft.row_tokens`
(b2tjax/step/packing.py), each trace its own segment; `micro_batch_size` then counts rows. Either
way the mask keeps assistant tokens only (a trace's first token never: it has no prediction from
its own trace), `positions` lists them so the step projects the output head only where the loss
reads a log-prob, and the token-mean NLL is the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from b2tjax.config.schema import SFTConfig
from b2tjax.step.batch import TrainBatch, loss_positions, pad_length, stack_rows
from b2tjax.step.packing import pack_records


def sft_batch(rows: Sequence[dict], max_seq_len: int) -> TrainBatch:
    """The TrainBatch of SFT examples {"ids", "mask"} (traces longer than `max_seq_len` are cut)."""
    length = pad_length(min(max(len(r["ids"]) for r in rows), max_seq_len))
    mask = stack_rows([r["mask"] for r in rows], length, np.float32)
    mask[:, 0] = 0.0  # position 0 has no prediction
    ids = stack_rows([r["ids"] for r in rows], length, np.int32)
    return TrainBatch(ids=ids, mask=mask, positions=loss_positions(mask))


def sft_step_batch(rows: Sequence[dict], sft: SFTConfig, row_devices: int = 1) -> tuple[TrainBatch, dict]:
    """The micro-batched TrainBatch of one SFT step under `sft` (packed or not), and its layout
    metrics: `rows` computed and `useful_token_share` (trace tokens over tokens computed)."""
    if not sft.packing:
        micro = sft.batch_size // sft.micro_batch_size if sft.micro_batch_size else 1
        batch = sft_batch(rows, sft.max_seq_len)
        real = sum(min(len(r["ids"]), batch.ids.shape[1]) for r in rows)
        return batch.split(micro), {"rows": float(len(rows)), "useful_token_share": real / batch.ids.size}
    ids = [np.asarray(r["ids"][: sft.max_seq_len], np.int32) for r in rows]
    masks = []
    for r, x in zip(rows, ids, strict=True):
        mask = np.asarray(r["mask"][: len(x)], np.float32)
        mask[0] = 0.0
        masks.append(mask)
    capacity = sft.row_tokens or pad_length(sft.max_seq_len)
    pack = pack_records([len(x) for x in ids], capacity, sft.micro_batch_size or sft.batch_size, row_devices)
    mask = pack.place(masks, np.float32)
    segment_ids, token_positions = pack.segments()
    batch = TrainBatch(
        ids=pack.place(ids, np.int32),
        mask=mask,
        positions=loss_positions(mask),
        segment_ids=segment_ids,
        token_positions=token_positions,
    )
    real = sum(len(x) for x in ids)
    return batch.split(pack.micro), {
        "rows": float(pack.total_rows),
        "useful_token_share": real / batch.ids.size,
    }
