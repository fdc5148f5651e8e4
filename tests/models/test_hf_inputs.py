"""Hugging Face and PEFT inputs that lie about their tensors are refused before anything is
allocated, in one line naming the tensor, its shape and the expected one: the
files are real safetensors written here, the expectations come from the config by hand."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
from flax import nnx
from safetensors.numpy import load_file, save_file

from b2tjax.cli.script import describe_os_error
from models import lora, peft
from models.config import get_config
from models.hf import load_pretrained, save_pretrained
from models.hf_check import TensorFormatError
from models.qwen3 import Qwen3ForCausalLM
from tests.launch.test_cli_errors import assert_one_clear_line, run_script

CFG = get_config("tiny")  # vocab 1024, hidden 64, 4 heads x 16, 2 kv heads, mlp 128, 2 layers


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hf") / "tiny"
    save_pretrained(Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(0)), out)
    return out


def _copy(src: Path, dst: Path, edit_config=None, edit_tensors=None) -> Path:
    """`src` rewritten into one model.safetensors, with its config / tensors edited."""
    dst.mkdir()
    tensors = {}
    for shard in sorted(src.glob("model-*.safetensors")):
        tensors.update(load_file(shard))
    config = json.loads((src / "config.json").read_text())
    save_file(edit_tensors(tensors) if edit_tensors else tensors, dst / "model.safetensors")
    (dst / "config.json").write_text(json.dumps(edit_config(config) if edit_config else config))
    return dst


@pytest.mark.slow  # runs launch/import_hf.py in a subprocess
def test_hf_tensors_are_checked_against_config_json(hf_dir, tmp_path):
    load_pretrained(hf_dir)  # intact
    huge = _copy(hf_dir, tmp_path / "vocab", edit_config=lambda c: dict(c, vocab_size=2**34))
    embed = r"tensor model.embed_tokens.weight has shape \[1024, 64\], its config implies \[17179869184, 64\]"
    with pytest.raises(TensorFormatError, match=embed):
        load_pretrained(huge)
    assert_one_clear_line(
        run_script("import_hf.py", "--hf", huge, "--out", tmp_path / "ckpt"), "model.embed_tokens.weight"
    )
    assert not (tmp_path / "ckpt").exists()  # no checkpoint of a model that is not there

    q = "model.layers.1.self_attn.q_proj.weight"  # HF [heads * head_dim, hidden] = [64, 64]
    k = "model.layers.0.self_attn.k_proj.weight"  # [32, 64]: the same size as [64, 32]
    lie = _copy(hf_dir, tmp_path / "shape", edit_tensors=lambda t: {**t, k: t[k].reshape(64, 32)})
    with pytest.raises(TensorFormatError, match=rf"{k} has shape \[64, 32\], its config implies \[32, 64\]"):
        load_pretrained(lie)
    ints = _copy(hf_dir, tmp_path / "dtype", edit_tensors=lambda t: {**t, q: t[q].view(np.int32)})
    with pytest.raises(TensorFormatError, match=rf"{q} has dtype I32"):
        load_pretrained(ints)
    # an in-memory state dict has no header: the fetched array is checked before its reshape
    from models.hf import params_from_hf

    tensors = load_file(lie / "model.safetensors")
    with pytest.raises(TensorFormatError, match=rf"{k} has shape \[64, 32\]"):
        params_from_hf(tensors.__getitem__, CFG)


def _header_of_length(path: Path, length: int) -> None:
    path.write_bytes(struct.pack("<Q", length) + b'{"a": 1}')


def test_a_safetensors_header_length_of_2_63_is_one_line(hf_dir, tmp_path):
    bad = _copy(hf_dir, tmp_path / "header")
    _header_of_length(bad / "model.safetensors", 2**63)
    with pytest.raises(
        TensorFormatError, match="model.safetensors is not a readable safetensors file"
    ) as err:
        load_pretrained(bad)
    assert "\n" not in describe_os_error(err.value)  # how run_main reports it


def _adapter(tmp_path: Path, targets: list[str], rank: int = 4) -> tuple[Path, nnx.Module]:
    model = Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(0))
    lora.add_lora(model, lora.LoraConfig(rank=rank, alpha=8.0, targets=targets), seed=1)
    out = tmp_path / f"adapter_{len(targets)}"
    peft.save_adapter(model, out, "base")
    return out, model


def _edit_config(path: Path, **changes) -> None:
    config = json.loads((path / peft.CONFIG_FILE).read_text())
    (path / peft.CONFIG_FILE).write_text(json.dumps({**config, **changes}))


def test_peft_configs_that_lie_are_refused_before_any_allocation(tmp_path):
    path, _ = _adapter(tmp_path, ["q_proj", "v_proj"])
    assert peft.check_adapter(path, CFG).targets == ["q_proj", "v_proj"]
    a = "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"
    cases = {
        8: rf"{a} has shape \[4, 64\], its config implies \[8, 64\]",  # r disagrees with the tensors
        0: "r must be a positive integer, got 0",
        1e9: "r must be a positive integer, got 1000000000.0",  # never a 512 GB allocation
    }
    for r, message in cases.items():
        _edit_config(path, r=r)
        with pytest.raises(TensorFormatError, match=message):
            peft.check_adapter(path, CFG)
    _edit_config(path, r=4, target_modules=["lm_head", "embed_tokens"])
    with pytest.raises(
        TensorFormatError, match=r"target_modules \['lm_head', 'embed_tokens'\] are not layer"
    ):
        peft.check_adapter(path, CFG)
    _edit_config(path, target_modules=["self_attn.q_proj", "v_proj"])  # PEFT's suffix match
    assert peft.check_adapter(path, CFG).targets == ["q_proj", "v_proj"]
    _edit_config(path, target_modules=r"model\.layers\.\d+\.self_attn\.(q|v)_proj")  # a regex
    assert peft.check_adapter(path, CFG).targets == ["q_proj", "v_proj"]
    _edit_config(path, target_modules=r"model\.layers\.0\.self_attn\.(q|v)_proj")
    with pytest.raises(TensorFormatError, match="adapts only some layers"):
        peft.check_adapter(path, CFG)
    _edit_config(path, target_modules="all-linear")  # every projection, and this file has two
    with pytest.raises(TensorFormatError, match=r"adapter has no tensor .*\(20 missing\)"):
        peft.check_adapter(path, CFG)
    _header_of_length(path / peft.WEIGHTS_FILE, 2**63)
    _edit_config(path, target_modules=["q_proj", "v_proj"])
    with pytest.raises(TensorFormatError, match="adapter_model.safetensors is not a readable safetensors"):
        peft.check_adapter(path, CFG)


def test_all_linear_means_every_projection_and_loads(tmp_path):
    path, trained = _adapter(tmp_path, list(lora.TARGETS))
    _edit_config(path, target_modules="all-linear")
    saved = peft.check_adapter(path, CFG)
    assert saved.targets == list(lora.TARGETS) and saved.rank == 4
    fresh = Qwen3ForCausalLM(CFG, rngs=nnx.Rngs(5))
    lora.add_lora(fresh, saved, seed=9)
    peft.load_adapter(fresh, path)
    for target in lora.TARGETS:
        for suffix in ("a", "b"):
            name = f"{target}_lora_{suffix}"
            got = getattr(lora.modules_of(fresh, target)[0][1], name)[...]
            want = getattr(lora.modules_of(trained, target)[0][1], name)[...]
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
