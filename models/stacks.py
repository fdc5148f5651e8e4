"""The decoder layers of a Qwen3 or Qwen3-MoE model as stacks for the layer scan.

Dense Qwen3: one stack `layers`. Qwen3-MoE: `layers` holds the sparse layers (routed experts,
models/moe.py) in model order, and `dense_layers` those that keep a dense MLP (HF `mlp_only_layers`,
`decoder_sparse_step` > 1), whose parameters have other shapes; the forward scans each run of
consecutive layers of one kind in turn. The Qwen3-MoE releases are sparse in every layer: one
stack, one scan, as dense Qwen3.
"""

from __future__ import annotations

from collections.abc import Callable

from flax import nnx

from models.config import Qwen3Config
from models.layers import DecoderLayer
from models.moe import MoeDecoderLayer
from models.settings import ModelRuntime

# (stack attribute, first and end index in that stack, first model layer)
Run = tuple[str, int, int, int]


def stacked_layers(make: Callable[[nnx.Rngs], nnx.Module], count: int, rngs: nnx.Rngs) -> nnx.Module:
    """`count` layers built by `make`, created stacked: every Param gets a leading axis named "layers"."""

    @nnx.split_rngs(splits=count)
    @nnx.vmap(in_axes=(0,), out_axes=0, transform_metadata={nnx.PARTITION_NAME: "layers"})
    def build(layer_rngs: nnx.Rngs) -> nnx.Module:
        return make(layer_rngs)

    return build(rngs)


def layer_runs(kinds: tuple[str, ...]) -> tuple[Run, ...]:
    """Runs of consecutive layers of one stack (`kinds`: each model layer's stack), in model order."""
    runs: list[Run] = []
    taken = dict.fromkeys(kinds, 0)
    for i, name in enumerate(kinds):
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1], runs[-1][2] + 1, runs[-1][3])
        else:
            runs.append((name, taken[name], taken[name] + 1, i))
        taken[name] += 1
    return tuple(runs)


def decoder_stacks(
    cfg: Qwen3Config, rngs: nnx.Rngs, runtime: ModelRuntime
) -> tuple[tuple[Run, ...], nnx.Module, nnx.Module | None]:
    """(the runs, the `layers` stack, the `dense_layers` stack or None) of `cfg`'s model."""
    dense = lambda r: DecoderLayer(cfg, rngs=r, runtime=runtime)  # noqa: E731
    if cfg.moe is None:
        layers = cfg.num_hidden_layers
        return layer_runs(("layers",) * layers), stacked_layers(dense, layers, rngs), None
    sparse = cfg.moe.sparse_layers(cfg.num_hidden_layers)
    if not any(sparse):
        raise ValueError("a Qwen3-MoE config with no sparse layer (mlp_only_layers holds them all)")
    runs = layer_runs(tuple("layers" if s else "dense_layers" for s in sparse))
    moe = lambda r: MoeDecoderLayer(cfg, rngs=r, runtime=runtime)  # noqa: E731
    stack = stacked_layers(moe, sum(sparse), rngs)
    return runs, stack, None if all(sparse) else stacked_layers(dense, sparse.count(False), rngs)
