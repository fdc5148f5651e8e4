"""What a train step's attention holds in device memory, as a note of the memory plan.

The reference path keeps one query block's fp32 scores per layer in flight ([rows, heads, block, T]
on each device: the forward's softmax and the backward's recomputation under the block
checkpoint); jax.nn.dot_product_attention's "xla" form the whole [rows, heads, T, T]; the Pallas
splash kernel (the TPU default) and cuDNN's flash kernel keep scores in on-chip blocks and write
only an fp32 log-sum-exp [rows, heads, T] for the backward. The compiled temporaries of the step
include these; the note names the implementation and the figure so two plans can be compared
(`model.attention=reference` against the default).
"""

from __future__ import annotations

from jax.sharding import Mesh

from b2tjax.plan.program_memory import GIB
from models.config import Qwen3Config
from models.layers import resolve_attention
from models.qwen3 import DTYPES
from models.sharding import mesh_platform, row_devices
from models.splash import splash_lengths

REFERENCE_BLOCK = 1024  # Qwen3ForCausalLM's attention_block as the trainer builds it


def _per_device(mesh: Mesh | None, rows: int, model: Qwen3Config) -> tuple[int, int]:
    """(rows, query heads) of one micro-batch on one device: rows over data x fsdp x expert when they split,
    heads over tensor when the KV heads do (models/sharding.py drops an axis that does not divide)."""
    if mesh is None:
        return rows, model.num_attention_heads
    split = row_devices(dict(mesh.shape))
    tensor = mesh.shape["tensor"]
    rows = rows // split if rows % split == 0 else rows
    heads = model.num_attention_heads
    return rows, heads // tensor if model.num_key_value_heads % tensor == 0 else heads


def attention_note(cfg, model: Qwen3Config, mesh: Mesh | None, micro_rows: int, length: int) -> str:
    """One line: the step's attention implementation and the score memory it keeps per layer."""
    impl = resolve_attention(cfg.model.attention, DTYPES[cfg.model.compute_dtype], mesh_platform(mesh))
    rows, heads = _per_device(mesh, micro_rows, model)
    block = REFERENCE_BLOCK if length > REFERENCE_BLOCK and length % REFERENCE_BLOCK == 0 else length
    scores = rows * heads * block * length * 4
    shape = f"[{rows} rows x {heads} heads x {block} x {length}]: {scores / GIB:.3f} GiB"
    if impl == "reference":
        return f"attention: reference path, fp32 scores of one query block per layer {shape}"
    lse = rows * heads * length * 4
    if impl == "xla":
        full = rows * heads * length * length * 4
        return f"attention: xla, fp32 scores of the whole row per layer: {full / GIB:.3f} GiB"
    kernel = "Pallas splash" if impl == "splash" else "cuDNN flash"
    if impl == "splash":
        padded, tile = splash_lengths(length)
        kernel += f" (T {padded}, blocks {tile})"
    return (
        f"attention: {kernel}, scores in on-chip blocks; fp32 log-sum-exp per layer {lse / GIB:.3f} GiB "
        f"(the reference path's fp32 score block {shape})"
    )
