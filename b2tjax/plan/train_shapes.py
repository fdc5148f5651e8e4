"""The train step's batch shape that launch/plan.py compiles: the largest a recipe's steps meet."""

from __future__ import annotations

from b2tjax.config import TrainConfig
from b2tjax.config.schema import Phase
from b2tjax.step.batch import pad_length


def train_batch_shape(cfg: TrainConfig, phase: Phase) -> tuple[int, int, int]:
    """[micro-batches, rows, T] of the recipe's largest train batch: rows of the row budget
    (b2tjax/step/packing.py; at least the sequence length's bucket, the longest record's row),
    micro-batches of the configured rows, as many as the configured (mini-)batch has: records never
    outnumber the rows they pack into."""
    if phase == Phase.SFT:
        s = cfg.sft
        rows, micro_rows, length, budget = s.batch_size, s.micro_batch_size, s.max_seq_len, s.row_tokens
    else:
        g = cfg.grpo
        rows, micro_rows = cfg.rollout_batch // g.mini_batches, g.micro_batch_size
        length, budget = cfg.rollout.max_seq_len, g.row_tokens
    micro_rows = micro_rows or rows
    return rows // micro_rows, micro_rows, pad_length(max(budget, length))


def packed_bound(shape: tuple[int, int, int], grad_bytes: int) -> tuple[dict[str, int], str]:
    """What a packed step holds beyond the planned one-shape step ([micro-batches, rows, T]), as
    residents, and a note saying why. It runs a gradient program per micro-batch shape (at most
    [rows, T]) adding into a gradient buffer, then the apply program (the optimizer update): the
    planned step holds their work, and its scan carries the same buffer, but with one micro-batch it
    keeps no buffer, so the buffer (`grad_bytes` a device) is added then
    (tests/b2tjax/test_memory_plan.py measures both programs against this bound)."""
    rows, width = shape[1:]
    note = (
        f"packed: a gradient program per micro-batch shape (at most {rows} rows x {width}) into a "
        "gradient buffer, then the apply program (optimizer update); bounded by this program"
    )
    if shape[0] > 1:
        return {}, note + " (its scan carries the buffer)"
    return {"packed gradient buffer": grad_bytes}, note + " plus the buffer"
