"""The adapters of a trained tiny LoRA run, exported in PEFT format, load in transformers + peft and
give our LoRA model's logits; the merged export and `--init hf:ADAPTER_DIR` agree with them too."""

from __future__ import annotations

import json
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from b2tjax.config import load_config
from b2tjax.run.lora_run import load_lora_run
from b2tjax.run.trainer import Trainer, build_model
from b2tjax.tasks.toy import DigitTask
from launch import export_hf
from models.config import get_config
from models.hf import save_pretrained
from models.qwen3 import Qwen3ForCausalLM

pytestmark = pytest.mark.slow  # trains a LoRA run, then loads it in transformers + peft

peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]
IDS = np.random.default_rng(0).integers(0, 16, size=(2, 20)).astype(np.int32)


def _hf_logits(model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model(torch.as_tensor(ids, dtype=torch.long)).logits.float().numpy()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(base HF dir, run dir, run config): a tiny fp32 base and a 3-step LoRA GRPO run on it."""
    tmp = tmp_path_factory.mktemp("lora_export")
    base_dir = tmp / "base"
    base = Qwen3ForCausalLM(get_config("tiny", vocab_size=16, initializer_range=0.1), rngs=nnx.Rngs(5))
    save_pretrained(base, base_dir)
    run = (
        "steps=3",
        "eval_at_end=false",
        "checkpoint.async_save=false",
        f"model.init=hf:{base_dir}",
        "model.lora.rank=4",
        "model.lora.alpha=8",
        "model.lora.targets=[q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj]",
        f"out={tmp / 'run'}",
    )
    cfg = load_config(ROOT / "configs" / "toy.yaml", run)
    Trainer(cfg, DigitTask(cfg.toy, cfg.rollout.temperature), build_model(cfg, 16), progress=False).run()
    return base_dir, tmp / "run" / "checkpoints", cfg


def test_peft_export_loads_in_transformers_with_our_logits(trained, tmp_path):
    base_dir, ckpt, _ = trained
    ours_model, _ = load_lora_run(ckpt)
    ours = np.asarray(ours_model(IDS))
    assert export_hf.main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "adapter"), "--adapter"]) == 0
    config = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert (
        config["r"] == 4 and config["lora_alpha"] == 8 and config["base_model_name_or_path"] == str(base_dir)
    )

    hf_base = transformers.AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32)
    plain = _hf_logits(hf_base, IDS)
    assert np.abs(plain - ours).max() > 1e-3  # training moved the adapters away from the base
    hf_lora = peft.PeftModel.from_pretrained(hf_base, tmp_path / "adapter").eval()
    np.testing.assert_allclose(_hf_logits(hf_lora, IDS), ours, atol=1e-4, rtol=0)


def test_merged_export_and_adapter_init_agree(trained, tmp_path):
    base_dir, ckpt, cfg = trained
    ours = np.asarray(load_lora_run(ckpt)[0](IDS))
    assert export_hf.main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "merged")]) == 0
    merged = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "merged", torch_dtype=torch.float32)
    np.testing.assert_allclose(_hf_logits(merged, IDS), ours, atol=1e-4, rtol=0)

    # `--init hf:ADAPTER_DIR` continues the exported adapter on its base: the same model again
    export_hf.main(["--checkpoint", str(ckpt), "--out", str(tmp_path / "adapter"), "--adapter"])
    cfg.model.init = f"hf:{tmp_path / 'adapter'}"
    again = build_model(cfg, 16)
    assert again.layers.attn.q_proj[...].dtype == jnp.float32
    np.testing.assert_allclose(np.asarray(again(IDS)), ours, atol=1e-6, rtol=0)
