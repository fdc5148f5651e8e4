"""HF directory -> import (Orbax checkpoint) -> export -> transformers: same logits, clean load."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import orbax.checkpoint as ocp
import pytest
import torch
import transformers
from flax import nnx

from models.checkpoint import load_model, save_model, write_config
from models.checksums import write_manifest
from models.hf import load_pretrained, save_pretrained
from models.settings import ModelRuntime
from models.tokenizer import load_tokenizer

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _logits(hf_model, ids: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return hf_model(torch.from_numpy(ids).long()).logits.numpy()


def _load_clean(path: str):
    model, info = transformers.AutoModelForCausalLM.from_pretrained(
        path, output_loading_info=True, dtype=torch.float32
    )
    problems = {k: v for k, v in info.items() if v and k != "error_msgs"} | {"errors": info.get("error_msgs")}
    assert not any(problems.values()), problems
    return model.eval()


def _run_cli(*args: str) -> None:
    proc = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]


@pytest.mark.slow
def test_cli_round_trip_sharded_untied(model_pair, tmp_path):
    cfg, hf, _ = model_pair("tiny-untied")
    src, ckpt, out = tmp_path / "hf", tmp_path / "ckpt", tmp_path / "export"
    hf.save_pretrained(src, max_shard_size="100KB")  # several shards + index.json
    assert (src / "model.safetensors.index.json").exists()
    _run_cli("launch/import_hf.py", "--hf", str(src), "--out", str(ckpt))
    assert (ckpt / "config.json").exists() and (ckpt / "params").is_dir()
    _run_cli(
        "launch/export_hf.py",
        "--checkpoint",
        str(ckpt),
        "--out",
        str(out),
        "--max-shard-size",
        "200KB",
        "--tokenizer",
        "qwen3",
    )
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1 and "lm_head.weight" in index["weight_map"]
    generation = json.loads((out / "generation_config.json").read_text())
    assert generation["do_sample"] is True and generation["pad_token_id"] == 151643
    tok = transformers.AutoTokenizer.from_pretrained(str(out))
    assert tok("<|im_start|>user\nHello world<|im_end|>")["input_ids"] == [
        151644,
        872,
        198,
        9707,
        1879,
        151645,
    ]
    back = _load_clean(str(out))
    assert back.config.rope_parameters["rope_theta"] == cfg.rope_theta
    ids = np.random.default_rng(0).integers(0, cfg.vocab_size, (2, 64), dtype=np.int32)
    np.testing.assert_array_equal(_logits(back, ids), _logits(hf, ids))


def test_tied_round_trip_in_process(model_pair, tmp_path):
    cfg, hf, _ = model_pair("tiny")
    hf.save_pretrained(tmp_path / "hf")  # single model.safetensors, no lm_head (tied)
    model = load_pretrained(tmp_path / "hf")
    ids = np.random.default_rng(1).integers(0, cfg.vocab_size, (1, 96), dtype=np.int32)
    expected = _logits(hf, ids)
    np.testing.assert_allclose(np.asarray(model(jnp.asarray(ids))), expected, atol=1e-4)
    save_model(model, tmp_path / "ckpt")
    save_pretrained(load_model(tmp_path / "ckpt"), tmp_path / "export")
    index = json.loads((tmp_path / "export" / "model.safetensors.index.json").read_text())
    assert "lm_head.weight" not in index["weight_map"]
    np.testing.assert_array_equal(_logits(_load_clean(str(tmp_path / "export")), ids), expected)


def test_exported_files_all_get_the_umask_mode(model_pair, tmp_path):
    """A shared model directory must be readable by colleagues: every file, the weight shards
    included (safetensors writes them 0600), gets 0666 minus the umask, like a plain open()."""
    _, _, ours = model_pair("tiny")
    previous = os.umask(0o022)
    try:
        save_pretrained(ours, tmp_path / "export", tokenizer=load_tokenizer("qwen3"))
        os.umask(0o027)  # a group-readable umask: the modes follow it
        save_pretrained(ours, tmp_path / "group", max_shard_size="100KB")
    finally:
        os.umask(previous)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "export").iterdir()}
    assert "model-00001-of-00001.safetensors" in modes and "tokenizer.json" in modes, modes
    assert set(modes.values()) == {0o644}, modes
    shards = sorted((tmp_path / "group").glob("*.safetensors"))
    assert len(shards) > 1
    assert {p.stat().st_mode & 0o777 for p in (tmp_path / "group").iterdir()} == {0o640}


def test_bf16_import_and_export(model_pair, tmp_path):
    cfg, hf, ours = model_pair("tiny")
    hf.save_pretrained(tmp_path / "hf")
    model = load_pretrained(
        tmp_path / "hf", runtime=ModelRuntime(dtype=jnp.bfloat16, param_dtype=jnp.bfloat16)
    )
    assert model.embed.embedding[...].dtype == jnp.bfloat16
    save_pretrained(model, tmp_path / "export")
    assert json.loads((tmp_path / "export" / "config.json").read_text())["dtype"] == "bfloat16"
    back = load_pretrained(tmp_path / "export")
    ref = nnx.state(ours, nnx.Param)
    got = nnx.state(back, nnx.Param)
    np.testing.assert_allclose(
        got["layers"]["mlp"]["up_proj"][...], ref["layers"]["mlp"]["up_proj"][...], rtol=1e-2
    )


def test_load_model_takes_latest_manager_step(model_pair, tmp_path):
    cfg, _, ours = model_pair("tiny-untied")
    pure = nnx.to_pure_dict(nnx.state(ours, nnx.Param))
    bumped = {**pure, "norm": {"scale": pure["norm"]["scale"] + 1.0}}
    run_dir = tmp_path / "checkpoints"
    with ocp.CheckpointManager(run_dir) as manager:
        for step, params in ((10, pure), (20, bumped)):
            manager.save(
                step,
                args=ocp.args.Composite(
                    params=ocp.args.StandardSave(params), train_state=ocp.args.JsonSave({"step": step})
                ),
            )
        manager.wait_until_finished()
    write_config(cfg, str(run_dir))
    for sealed, only in ((run_dir / "10", None), (run_dir / "20", None), (run_dir, ("config.json",))):
        write_manifest(sealed, only)  # as RunCheckpointer seals a run
    loaded = load_model(run_dir)
    np.testing.assert_array_equal(loaded.norm.scale[...], bumped["norm"]["scale"])
    np.testing.assert_array_equal(loaded.lm_head.kernel[...], pure["lm_head"]["kernel"])


def test_bad_inputs_give_clear_errors(model_pair, tmp_path):
    cfg, hf, _ = model_pair("tiny")
    with pytest.raises(FileNotFoundError, match="safetensors"):
        (tmp_path / "empty").mkdir()
        (tmp_path / "empty" / "config.json").write_text(json.dumps(cfg.to_hf()))
        load_pretrained(tmp_path / "empty")
    from safetensors.numpy import save_file

    partial = {k: v.numpy() for k, v in hf.state_dict().items() if "layers.1.mlp" not in k}
    (tmp_path / "partial").mkdir()
    save_file(partial, str(tmp_path / "partial" / "model.safetensors"))
    (tmp_path / "partial" / "config.json").write_text(json.dumps(cfg.to_hf()))
    with pytest.raises(ValueError, match="missing 3 Qwen3 tensors"):
        load_pretrained(tmp_path / "partial")
    with pytest.raises(ValueError, match="model_type"):
        from models.config import Qwen3Config

        Qwen3Config.from_hf({**cfg.to_hf(), "model_type": "llama"})
    with pytest.raises(FileNotFoundError):
        load_model(tmp_path / "partial")
