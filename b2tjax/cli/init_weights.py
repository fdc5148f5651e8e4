"""`model.preset` / `model.overrides` against the weights `model.init` loads.

Both settings shape only a random init: with `model.init` the weights' own config.json sets the
model, so a setting that disagrees with it would be ignored without a word (and recorded in the
run's config.yaml as if it applied). It is refused in one line instead, before anything is built.
"""

from __future__ import annotations

import os
from typing import Any

from b2tjax.config.schema import ModelConfig
from b2tjax.errors import UserError
from b2tjax.run.resume import SHAPE_KEYS
from models.config import Qwen3Config, get_config

# What a preset fixes: the parameter shapes (the vocabulary follows the tokenizer, RoPE the recipe;
# tied embeddings and attention biases are the checkpoint's own and not compared here).
_SHAPE = tuple(k for k in SHAPE_KEYS if k not in ("vocab_size", "tie_word_embeddings", "attention_bias"))
_DEFAULT_PRESET = ModelConfig().preset  # what a recipe that names none gets: not a user's choice


def check_init_agrees(init: str, preset: str, overrides: dict[str, Any]) -> None:
    """One-line UserError when `preset` (other than the default) or an entry of `overrides`
    disagrees with the config.json of the weights `init` ('hf:DIR' / 'ckpt:DIR', '' = none)."""
    directory = init.partition(":")[2]
    if not init or not os.path.isfile(os.path.join(directory, "config.json")):
        return  # a random init, or weights the loader reports missing in its own words
    saved = Qwen3Config.from_hf(directory)
    drop = f"with model.init the weights set the model: drop it (model.init={init})"
    for key, value in overrides.items():
        if hasattr(saved, key) and getattr(saved, key) != value:
            raise UserError(
                f"model.overrides.{key}={value!r} disagrees with the weights ({key} "
                f"{getattr(saved, key)!r}); {drop}"
            )
    if preset == _DEFAULT_PRESET:
        return
    try:
        wanted = get_config(preset)
    except KeyError as err:
        raise UserError(f"model.preset: {err.args[0]}") from None
    for key in _SHAPE:
        if getattr(wanted, key) != getattr(saved, key):
            raise UserError(
                f"model.preset={preset} ({key} {getattr(wanted, key)}) disagrees with the weights "
                f"({key} {getattr(saved, key)}); {drop} or name the weights' preset"
            )
