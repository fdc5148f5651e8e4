"""One SFT step's batch: tokenised traces laid out as the fixed-shape TrainBatch the step reads.

Rows are padded to the step's longest trace (in a power-of-two bucket, at most `max_seq_len`), the
mask keeps assistant tokens only, and `positions` lists them so the step projects the output head
only where the loss reads a log-prob.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from b2tjax.step.batch import TrainBatch, loss_positions, pad_length, stack_rows


def sft_batch(rows: Sequence[dict], max_seq_len: int) -> TrainBatch:
    """The TrainBatch of SFT examples {"ids", "mask"} (traces longer than `max_seq_len` are cut)."""
    length = pad_length(min(max(len(r["ids"]) for r in rows), max_seq_len))
    mask = stack_rows([r["mask"] for r in rows], length, np.float32)
    mask[:, 0] = 0.0  # position 0 has no prediction
    ids = stack_rows([r["ids"] for r in rows], length, np.int32)
    return TrainBatch(ids=ids, mask=mask, positions=loss_positions(mask))
