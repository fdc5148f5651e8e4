"""The memory plan bounds a packed step's programs (b2tjax/plan/train_shapes.py `packed_bound`).

launch/plan.py compiles the one-shape scanned step at the recipe's largest batch; a step (every
step packs its rows) runs instead a gradient program per micro-batch shape (at most the planned
rows x T) adding into a gradient buffer, then the apply program. Compiled on the tiny Qwen3
(XLA:CPU), their peaks (with the optimizer state the gradient program leaves resident) stay
within the planned step's, plus the buffer when the plan has a single micro-batch (no scan carry
holds one).
"""

import functools

import jax
import jax.numpy as jnp
import optax
import pytest
from flax import nnx

from b2tjax.config import TrainConfig
from b2tjax.plan.train_shapes import packed_bound
from b2tjax.step import loss as grpo
from b2tjax.step.batch import TrainBatch
from b2tjax.step.train_step import BoundModel, init_train_state, make_step_fns
from models.config import get_config
from models.qwen3 import Qwen3ForCausalLM
from models.settings import ModelRuntime

pytestmark = pytest.mark.slow  # compiles the tiny model's train programs

S = jax.ShapeDtypeStruct


def _peak(lowered) -> int:
    m = lowered.compile().memory_analysis()
    return m.argument_size_in_bytes + m.output_size_in_bytes - m.alias_size_in_bytes + m.temp_size_in_bytes


def _bytes(tree) -> int:
    return sum(x.size * x.dtype.itemsize for x in jax.tree.leaves(tree))


def _batch(shape: tuple[int, ...]) -> TrainBatch:
    f, i = S(shape, jnp.float32), S(shape, jnp.int32)
    packed = dict(segment_ids=i, token_positions=i)
    return TrainBatch(ids=i, mask=f, positions=i, old_logprobs=f, advantages=f, ref_logprobs=f, **packed)


@functools.cache
def _programs():
    """(step functions, abstract state, peaks of the gradient programs of the planned micro-batch
    and narrower ones, peak of the apply program): compiled once for both plans."""
    model = Qwen3ForCausalLM(
        get_config("tiny"), rngs=nnx.Rngs(0), runtime=ModelRuntime(dtype=jnp.float32, param_dtype=jnp.float32)
    )
    model_fn, params = BoundModel.from_model(model)
    optimizer, grpo_cfg = optax.adamw(1e-3), TrainConfig().grpo
    fns = make_step_fns(model_fn, optimizer, lambda s: 1e-3, grpo_cfg, temperature=1.0, fixed_length=64)
    state = jax.eval_shape(lambda: init_train_state(params, optimizer))
    grads = jax.tree.map(lambda x: S(x.shape, x.dtype), state.params)
    norm = grpo.Normaliser(*(S((), jnp.float32) for _ in range(3)))
    grad_peaks = {
        (rows, width): _peak(fns.grpo_grad.lower(state.params, grads, _batch((1, rows, width)), norm))
        for rows, width in ((4, 256), (2, 128), (1, 64))  # the planned micro-batch and narrower ones
    }
    stats = {"entropy": S((), jnp.float32)}
    apply_peak = _peak(fns.apply.lower(state, grads, S((), jnp.float32), stats))
    return fns, state, grad_peaks, apply_peak


@pytest.mark.parametrize("micro", [1, 2])
def test_gradient_and_apply_programs_fit_the_planned_step(micro):
    fns, state, grad_peaks, apply_peak = _programs()
    shape = (micro, 4, 256)
    planned = _peak(fns.grpo_step.lower(state, _batch(shape)))
    extra, note = packed_bound(shape, _bytes(state.params))
    assert note and (extra == {} if micro > 1 else extra == {"packed gradient buffer": _bytes(state.params)})
    bound = planned + sum(extra.values())
    for (rows, width), grad in grad_peaks.items():
        assert grad + _bytes(state.opt_state) <= bound, (rows, width)
    assert apply_peak <= bound
