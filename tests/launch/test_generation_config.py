"""An exported checkpoint stops where a chat turn ends: generation_config.json is
the one Qwen3's release ships (eos <|im_end|> and <|endoftext|>, pad, the recommended sampling),
and transformers' `generate` on the merged export of a LoRA run stops at <|im_end|>."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flax import nnx

from b2tjax.config import load_config
from b2tjax.run.trainer import Trainer, build_model
from b2tjax.tasks.toy import DigitTask
from launch import export_hf
from models.config import get_config
from models.hf import save_pretrained
from models.qwen3 import Qwen3ForCausalLM

pytestmark = pytest.mark.slow  # trains and exports a LoRA run, then generates with transformers

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
# Qwen/Qwen3-0.6B's generation_config.json (its release, transformers_version aside).
QWEN3_RELEASE = {
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
}
IM_END = 151645


@pytest.fixture(scope="module")
def merged(tmp_path_factory) -> Path:
    """The merged HF export (with the qwen3 tokenizer) of a 1-step LoRA run on a tiny base that has
    Qwen3's vocabulary and Qwen3's config ids (eos_token_id 151643, as the base releases say)."""
    tmp = tmp_path_factory.mktemp("generation_config")
    shape = dict(vocab_size=151936, hidden_size=32, intermediate_size=64, num_hidden_layers=1)
    shape.update(bos_token_id=151643, eos_token_id=151643, initializer_range=0.1)
    save_pretrained(Qwen3ForCausalLM(get_config("tiny", **shape), rngs=nnx.Rngs(3)), tmp / "base")
    run = (
        "steps=1",
        "eval_at_end=false",
        "checkpoint.async_save=false",
        f"model.init=hf:{tmp / 'base'}",
        "model.lora.rank=2",
        "model.lora.targets=[q_proj, v_proj]",
        "rollout.group_size=2",
        "rollout.prompts_per_step=1",
        "rollout.max_seq_len=16",
        f"out={tmp / 'run'}",
    )
    cfg = load_config(ROOT / "configs" / "toy.yaml", run)
    Trainer(cfg, DigitTask(cfg.toy, cfg.rollout.temperature), build_model(cfg), progress=False).run()
    args = ["--checkpoint", str(tmp / "run" / "checkpoints"), "--out", str(tmp / "merged")]
    assert export_hf.main([*args, "--tokenizer", "qwen3"]) == 0
    return tmp / "merged"


def test_generation_config_is_qwen3s_release(merged):
    assert json.loads((merged / "generation_config.json").read_text()) == QWEN3_RELEASE


def test_generate_on_the_merged_lora_export_stops_at_im_end(merged):
    model = transformers.AutoModelForCausalLM.from_pretrained(merged, torch_dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(merged)
    prompt = tokenizer(
        "<|im_start|>user\nPlan a trip<|im_end|>\n<|im_start|>assistant\n", return_tensors="pt"
    )
    n = prompt["input_ids"].shape[1]
    # a bias makes <|im_end|> the likeliest token at once, as a trained chat model's turn end is
    with torch.no_grad():
        out = model.generate(**prompt, do_sample=False, max_new_tokens=6, sequence_bias={(IM_END,): 100.0})
    assert out[0, n:].tolist() == [IM_END]  # one <|im_end|>, then stop (not six of them)
    with torch.no_grad():  # sampling with the exported defaults stops the same way
        sampled = model.generate(**prompt, max_new_tokens=6, sequence_bias={(IM_END,): 100.0})
    assert sampled[0, n:].tolist() == [IM_END]
