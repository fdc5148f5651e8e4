"""`Sampler`: the engine a training task rolls out with, kept across steps.

An engine compiles its programs and allocates its KV cache once; between training steps only the
weights change (`RolloutEngine.update_weights`, no recompilation). When a task asks for another
engine config (the final evaluation's temperature, another number of rows) the old engine is
dropped before the new one is built, so its weights copy and KV cache make room for the new one's.
"""

from __future__ import annotations

from typing import Any

from jax.sharding import Mesh

from models.causal_lm import CausalLM
from rollout.config import RolloutConfig
from rollout.engine import RolloutEngine


class Sampler:
    """The one engine of a task's rollouts: built on first use, rebuilt when its config changes,
    otherwise given the new weights."""

    def __init__(self, tokenizer: Any, mesh: Mesh | None = None):
        self.tokenizer, self.mesh = tokenizer, mesh
        self.engine: RolloutEngine | None = None

    def engine_for(self, model: CausalLM, config: RolloutConfig) -> RolloutEngine:
        """The engine for `config` with `model`'s weights."""
        if self.engine is None or self.engine.config != config:
            self.engine = None  # freed before the new engine allocates its cache
            self.engine = RolloutEngine(model, self.tokenizer, config, mesh=self.mesh)
        else:
            self.engine.update_weights(model)
        return self.engine
