"""The tokenizer that comes with a run's initial weights (`model.init: hf:DIR` or `ckpt:DIR`).

Weights mean something only with the tokenizer they were trained with, so a run with an init takes
the checkpoint's own tokenizer files (DIR/tokenizer.json: a Hugging Face release ships them,
launch/import_hf.py copies them beside the checkpoint, a training run saves its own beside its
checkpoints) or, when DIR has none, the tokenizer its config.json names (`model_type` qwen2 or
qwen3 with Qwen's vocabulary: the built-in "qwen3"). The recipe default `sentencepiece` means "train
one on the corpus", which only a random init can use, so with an init it yields to the checkpoint's.
Any other `model.tokenizer` ("qwen3", a path) must agree with the weights (vocabulary size,
special-token ids), or the run refuses in one line naming the mismatch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from b2tjax.errors import UserError
from models.tokenizer import load_tokenizer

TRAINED_ON_CORPUS = "sentencepiece"  # model.tokenizer's "train one for a random init"
QWEN_MODEL_TYPES = ("qwen2", "qwen3")  # one vocabulary: Qwen's 151,643 BPE ranks + added tokens
QWEN_VOCAB = 151_669  # real tokens of that vocabulary (the embedding table is padded to 151,936)


def _init_dir(init: str) -> Path | None:
    return Path(init.split(":", 1)[1]).expanduser().absolute() if ":" in init else None


def named_tokenizer(directory: Path) -> str | None:
    """The tokenizer `directory` carries: itself when it holds tokenizer.json, "qwen3" when its
    config.json names a Qwen model type whose embedding table holds Qwen's vocabulary, else None."""
    if (directory / "tokenizer.json").is_file():
        return str(directory)
    try:
        config = json.loads((directory / "config.json").read_text())
    except (OSError, ValueError):
        return None
    qwen = config.get("model_type") in QWEN_MODEL_TYPES and config.get("vocab_size", 0) >= QWEN_VOCAB
    return "qwen3" if qwen else None


def _special_ids(tokenizer: Any) -> dict[str, int]:
    return {
        "<|im_start|>": tokenizer.im_start_id,
        "<|im_end|>": tokenizer.im_end_id,
        "<|endoftext|>": tokenizer.eos_id,
    }


def _config_ids(config: dict) -> set[int]:
    """The token ids config.json names (bos / eos / pad, each an int, a list or null)."""
    ids: set[int] = set()
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = config.get(key)
        ids.update(value if isinstance(value, list) else [] if value is None else [value])
    return ids


def mismatch(tokenizer: Any, directory: Path, own: Any | None) -> str | None:
    """What makes `tokenizer` disagree with the weights in `directory` (whose own tokenizer is
    `own`, or None), or None when nothing does."""
    config = (
        json.loads((directory / "config.json").read_text()) if (directory / "config.json").is_file() else {}
    )
    rows = config.get("vocab_size")
    if rows is not None and tokenizer.vocab_size > rows:
        return f"vocabulary {tokenizer.vocab_size} > the model's {rows} embedding rows"
    if own is not None:
        if own.vocab_size != tokenizer.vocab_size:
            return f"vocabulary {tokenizer.vocab_size} vs the checkpoint tokenizer's {own.vocab_size}"
        theirs, ours = _special_ids(own), _special_ids(tokenizer)
        differ = [f"{t} {ours[t]} vs {theirs[t]}" for t in ours if ours[t] != theirs[t]]
        if differ:
            return "special-token ids " + ", ".join(differ) + " (the checkpoint tokenizer's second)"
    named = _config_ids(config) - set(_special_ids(tokenizer).values())
    if named:
        return f"config.json names token ids {sorted(named)}, which are none of {_special_ids(tokenizer)}"
    return None


def weights_tokenizer(init: str, chosen: str) -> tuple[str, str | None]:
    """(the tokenizer spec the run uses, a line saying why when it is not `chosen`) for weights
    `init` (a base's `model.init`; "" = random) and `model.tokenizer` = `chosen`."""
    directory = _init_dir(init)
    if directory is None:
        return chosen, None
    carried = named_tokenizer(directory)
    if chosen == TRAINED_ON_CORPUS:
        if carried is None:
            raise UserError(
                f"model.init={init} carries no tokenizer (no tokenizer.json, no Qwen config.json): "
                "name the one its weights were trained with in model.tokenizer (qwen3 or a path)"
            )
        why = f"tokenizer: {carried} (the one model.init={init} comes with)"
        return carried, why
    try:
        tokenizer = load_tokenizer(chosen)
        own = load_tokenizer(carried) if carried is not None else None
    except (OSError, ValueError, ImportError) as err:
        raise UserError(f"model.tokenizer={chosen}: {err}") from None
    problem = mismatch(tokenizer, directory, own)
    if problem:
        raise UserError(
            f"model.tokenizer={chosen} does not match the weights of model.init={init}: {problem}"
        )
    return chosen, None
