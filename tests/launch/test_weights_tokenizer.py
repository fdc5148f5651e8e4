"""`train.py --init hf:DIR` trains with the tokenizer that comes with the weights:
the checkpoint's own tokenizer files, or the one its config.json names, never a SentencePiece
model trained for a random init; a tokenizer that does not match the weights is refused in one
line naming the mismatch. Checkpoints are written by transformers itself (its Qwen3 config)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from b2tjax.errors import UserError
from models.tokenizer import load_tokenizer
from tests.launch_scripts import load_script

transformers = pytest.importorskip("transformers")

train = load_script("launch/train.py")


def _hf_config(directory: Path, **fields) -> Path:
    """config.json of a Qwen3 checkpoint as transformers writes it (Qwen3's own vocabulary and ids)."""
    config = dict(vocab_size=151936, hidden_size=32, num_hidden_layers=1, num_attention_heads=2)
    config.update(num_key_value_heads=1, head_dim=16, intermediate_size=64, bos_token_id=151643)
    config.update(eos_token_id=151645)
    config.update(fields)
    transformers.Qwen3Config(**config).save_pretrained(directory)
    return directory


def _resolved(*argv: str):
    args = train.parse_args(list(argv))
    cfg, changes = train.resolve_config(args, train.read_recipe(args))
    assert changes is None
    return cfg


def test_the_checkpoints_own_tokenizer_files_replace_the_recipes_sentencepiece(tmp_path):
    hf = _hf_config(tmp_path / "hf")
    load_tokenizer("qwen3").save_hf(hf)  # what a Qwen3 release ships beside its weights
    cfg = _resolved("--init", f"hf:{hf}", "--out", str(tmp_path / "run"))  # the tiny recipe
    assert cfg.model.tokenizer == str(hf)
    tok = load_tokenizer(cfg.model.tokenizer)
    assert (tok.vocab_size, tok.im_end_id, tok.eos_id) == (151669, 151645, 151643)


def test_a_checkpoint_without_tokenizer_files_takes_the_one_its_config_names(tmp_path):
    hf = _hf_config(tmp_path / "hf")
    cfg = _resolved("--init", f"hf:{hf}", "--out", str(tmp_path / "run"))
    assert cfg.model.tokenizer == "qwen3"
    # a named tokenizer that matches the weights is kept
    assert _resolved("--init", f"hf:{hf}", "model.tokenizer=qwen3").model.tokenizer == "qwen3"


def test_a_tokenizer_that_does_not_fit_the_weights_is_refused_in_one_line(tmp_path):
    small = _hf_config(tmp_path / "small", vocab_size=1024, bos_token_id=None, eos_token_id=None)
    with pytest.raises(UserError, match=r"vocabulary 151669 > the model's 1024 embedding rows"):
        _resolved("--init", f"hf:{small}", "model.tokenizer=qwen3")
    other_ids = _hf_config(tmp_path / "ids", bos_token_id=1, eos_token_id=2)
    with pytest.raises(UserError, match=r"config.json names token ids \[1, 2\]") as err:
        _resolved("--init", f"hf:{other_ids}", "model.tokenizer=qwen3")
    assert "\n" not in str(err.value)
    # no tokenizer files and a config naming none: the run cannot guess, it asks
    (tmp_path / "bare").mkdir()
    (tmp_path / "bare" / "config.json").write_text(json.dumps({"model_type": "llama", "vocab_size": 32000}))
    with pytest.raises(UserError, match="carries no tokenizer"):
        _resolved("--init", f"hf:{tmp_path / 'bare'}")


def test_special_token_ids_must_agree_with_the_checkpoints_tokenizer(tmp_path):
    """A tokenizer of the same size whose chat ids sit elsewhere is refused, naming each id."""
    hf = _hf_config(tmp_path / "hf")
    load_tokenizer("qwen3").save_hf(hf)
    moved = tmp_path / "moved"
    moved.mkdir()
    data = json.loads((hf / "tokenizer.json").read_text())
    for added in data["added_tokens"]:  # swap <|im_start|> (151644) and <|im_end|> (151645)
        added["content"] = {"<|im_start|>": "<|im_end|>", "<|im_end|>": "<|im_start|>"}.get(
            added["content"], added["content"]
        )
    (moved / "tokenizer.json").write_text(json.dumps(data))
    with pytest.raises(UserError, match=r"<\|im_start\|> 151645 vs 151644, <\|im_end\|> 151644 vs 151645"):
        _resolved("--init", f"hf:{hf}", f"model.tokenizer={moved}")
