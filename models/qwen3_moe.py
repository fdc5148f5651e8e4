"""Qwen3MoeForCausalLM in Flax NNX: dense Qwen3 (models/qwen3.py) whose sparse layers' MLP is the
routed-experts block of models/moe.py. Attention, RoPE, the KV caches (contiguous and paged), the
cached and uncached forwards and the layer scan are dense Qwen3's.

Layers that keep a dense MLP (HF `mlp_only_layers`, `decoder_sparse_step` > 1) have other
parameter shapes, so the model holds two stacks: `layers` (the sparse ones, in model order) and
`dense_layers`; the forward scans each run of consecutive layers of one kind in turn. The Qwen3-MoE
releases are sparse in every layer: one stack, one scan, as dense Qwen3.
"""

from __future__ import annotations

from typing import Any

import jax
from flax import nnx

from models.config import Qwen3Config
from models.layers import Attention, DecoderLayer, RMSNorm
from models.moe import MoeBlock
from models.qwen3 import Qwen3ForCausalLM, stacked_layers
from models.settings import DEFAULT_RUNTIME, ModelRuntime


class MoeDecoderLayer(DecoderLayer):
    """A decoder layer whose MLP is the routed experts; padding tokens are not routed."""

    def __init__(self, cfg: Qwen3Config, *, rngs: nnx.Rngs, runtime: ModelRuntime, experts: str):
        dtype, param_dtype = runtime.dtype, runtime.param_dtype
        self.input_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.attn = Attention(cfg, rngs=rngs, runtime=runtime)
        self.post_attn_norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps, dtype=dtype, param_dtype=param_dtype)
        self.mlp = MoeBlock(cfg, rngs=rngs, dtype=dtype, param_dtype=param_dtype, experts=experts)

    def feed_forward(self, x: jax.Array, valid: jax.Array | None) -> jax.Array:
        return self.mlp(x, valid)


def layer_runs(sparse: tuple[bool, ...]) -> tuple[tuple[str, int, int, int], ...]:
    """Runs of consecutive layers of one kind: (stack attribute, first and end index in that
    stack, first model layer), in model order."""
    runs: list[tuple[str, int, int, int]] = []
    taken = {"layers": 0, "dense_layers": 0}
    for i, is_sparse in enumerate(sparse):
        name = "layers" if is_sparse else "dense_layers"
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1], runs[-1][2] + 1, runs[-1][3])
        else:
            runs.append((name, taken[name], taken[name] + 1, i))
        taken[name] += 1
    return tuple(runs)


class Qwen3MoeForCausalLM(Qwen3ForCausalLM):
    """Qwen3-MoE: `Qwen3ForCausalLM`'s entry points and contract (models/causal_lm.py); `experts`
    picks the expert computation (models.moe.EXPERT_IMPLS: "auto", "ragged", "dense")."""

    def __init__(
        self,
        cfg: Qwen3Config,
        *,
        rngs: nnx.Rngs,
        runtime: ModelRuntime = DEFAULT_RUNTIME,
        experts: str = "auto",
    ):
        if cfg.moe is None:
            raise ValueError("Qwen3MoeForCausalLM needs a config with `moe` (HF model_type 'qwen3_moe')")
        self.experts = experts
        super().__init__(cfg, rngs=rngs, runtime=runtime)

    def _build_layers(self, cfg: Qwen3Config, rngs: nnx.Rngs, runtime: ModelRuntime) -> None:
        """The sparse layers' stack and, when some layers keep a dense MLP, theirs."""
        sparse = cfg.moe.sparse_layers(cfg.num_hidden_layers)
        if not any(sparse):
            raise ValueError("a Qwen3-MoE config with no sparse layer (mlp_only_layers holds them all)")
        self.runs = layer_runs(sparse)
        moe = lambda r: MoeDecoderLayer(cfg, rngs=r, runtime=runtime, experts=self.experts)  # noqa: E731
        self.layers = stacked_layers(moe, sum(sparse), rngs)
        if not all(sparse):
            dense = lambda r: DecoderLayer(cfg, rngs=r, runtime=runtime)  # noqa: E731
            self.dense_layers = stacked_layers(dense, len(sparse) - sum(sparse), rngs)

    def _layer_runs(self) -> list[tuple[Any, Any, range]]:
        out = []
        for name, start, stop, first in self.runs:
            stack = getattr(self, name)
            graphdef, state = nnx.split(stack)
            if stop - start < len(jax.tree.leaves(state)[0]):  # part of the stack: its slice
                state = jax.tree.map(lambda a, start=start, stop=stop: a[start:stop], state)
            out.append((graphdef, state, range(first, first + stop - start)))
        return out
