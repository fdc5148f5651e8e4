"""One loader for a policy to roll out: a checkpoint (Hugging Face safetensors directory, Orbax model
checkpoint or a training run's checkpoints/) and the tokenizer that goes with it.

launch/rollouts.py, launch/eval.py (`--policy model`, via b2tjax.cli.himap_agents) and the
evaluation notebook all load through here, so a directory is recognised the same way everywhere.
Without a checkpoint the policy is a random tiny Qwen3 sized to the tokenizer (a smoke test of the
pipeline). Problems are one-line ValueErrors naming the path; callers turn them into UserErrors.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from flax import nnx

from b2tjax.run.adapters import is_lora_run
from b2tjax.run.lora_run import load_lora_run
from models.checkpoint import load_model
from models.config import get_config
from models.hf import load_pretrained
from models.qwen3 import Qwen3ForCausalLM
from models.spm import train_sentencepiece
from models.tokenizer import load_tokenizer
from rollout.config import RolloutConfig
from rollout.prompt import prompt_text

# The engine's settings for rolling a policy out outside training (launch/rollouts.py, the notebook,
# launch/eval.py's HiMAP teams: b2tjax.cli.himap_agents), before a recipe's `rollout:` section and
# the command line: a real model's turns and lengths (a HiMAP role's turns are its own limits').
ROLLOUT_DEFAULTS = RolloutConfig(
    batch_rows=8, max_turns=10, max_turn_tokens=1024, max_seq_len=16384, python_tool=True
)


@dataclasses.dataclass
class Policy:
    """A model and its tokenizer; `tokenizer_spec` is what `models.tokenizer.load_tokenizer` reloads
    (written into each rollout record)."""

    model: Any
    tokenizer: Any
    tokenizer_spec: str


def checkpoint_error(checkpoint: Path) -> str | None:
    """Why `checkpoint` cannot be a policy checkpoint (checked before anything loads), or None."""
    if not checkpoint.is_dir():
        return f"--checkpoint {checkpoint} is not a directory"
    if not (checkpoint / "config.json").is_file():
        return (
            f"--checkpoint {checkpoint} holds no config.json: it is no model checkpoint, run "
            "checkpoints/ or Hugging Face directory"
        )
    return None


def checkpoint_tokenizer(checkpoint: Path) -> str:
    """The checkpoint's own tokenizer (tokenizer.json, or exactly one SentencePiece .model beside the
    weights), else the Qwen3 tokenizer its weights were most likely trained with."""
    own = (checkpoint / "tokenizer.json").exists() or len(list(checkpoint.glob("*.model"))) == 1
    return str(checkpoint) if own else "qwen3"


def load_checkpoint_model(checkpoint: Path) -> Any:
    """Qwen3ForCausalLM from Hugging Face safetensors or an Orbax model / run checkpoint (a LoRA
    run's: its base with the trained adapters, b2tjax/run/adapters.py)."""
    if any(checkpoint.glob("*.safetensors")):
        return load_pretrained(checkpoint)

    if is_lora_run(checkpoint):
        return load_lora_run(checkpoint)[0]

    return load_model(checkpoint)


def load_policy(
    checkpoint: Path | None,
    tokenizer: str | None = None,
    *,
    train_tokenizer: Callable[[], str] | None = None,
    seed: int = 0,
) -> Policy:
    """The policy in `checkpoint` (None: a random tiny Qwen3) with `tokenizer` (a load_tokenizer
    spec), else the checkpoint's own, else (no checkpoint) the path `train_tokenizer()` trains.
    The tokenizer's ids must fit the model's vocabulary."""

    if checkpoint is not None and (error := checkpoint_error(checkpoint)) is not None:
        raise ValueError(error)
    if tokenizer is None and checkpoint is not None:
        tokenizer = checkpoint_tokenizer(checkpoint)
    if tokenizer is None:
        if train_tokenizer is None:
            raise ValueError("no checkpoint and no tokenizer: give one, or a corpus to train one on")
        tokenizer = train_tokenizer()
    tok = load_tokenizer(tokenizer)
    model = (
        load_checkpoint_model(checkpoint) if checkpoint is not None else _random_tiny(tok.vocab_size, seed)
    )
    if model.config.vocab_size < tok.vocab_size:
        raise ValueError(
            f"tokenizer {tokenizer} has {tok.vocab_size} ids but the model only {model.config.vocab_size}: "
            "use the tokenizer the model was trained with"
        )
    return Policy(model, tok, tokenizer)


def _random_tiny(vocab_size: int, seed: int) -> Any:

    cfg = dataclasses.replace(get_config("tiny"), vocab_size=vocab_size)
    return Qwen3ForCausalLM(cfg, rngs=nnx.Rngs(seed))


def prompt_tokenizer(bench: Any, instances: list[dict], variant: str | None, prefix: str) -> str:
    """A 2048-piece SentencePiece model trained on the instances' prompts, saved at `prefix`.model:
    the tokenizer of a random tiny policy, which has no tokenizer of its own."""

    corpus = [
        prompt_text(bench.prompt(inst, variant=variant or bench.prompt_variants[0])) for inst in instances
    ]
    return str(train_sentencepiece(corpus, prefix, vocab_size=2048))
