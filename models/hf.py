"""Hugging Face interop: HF Qwen3 state-dict names/layouts <-> our stacked NNX params, streamed
safetensors import (tensor by tensor, straight into possibly sharded arrays) and sharded export."""

from __future__ import annotations

import collections
import contextlib
import itertools
import json
import logging
import os
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import Mesh, NamedSharding
from tqdm.auto import tqdm

from models.config import QWEN3_BOS_ID, QWEN3_EOS_ID, Qwen3Config
from models.hf_check import check_array, check_tensors, header, hf_shapes, open_safetensors
from models.hf_maps import get_path, hf_names, set_path, tensor_maps
from models.qwen3 import abstract_model, on_mesh
from models.settings import DEFAULT_RUNTIME, ModelRuntime
from models.sharding import state_shardings

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# HF tensors -> our params


def params_from_hf(
    get_tensor: Callable[[str], np.ndarray],
    cfg: Qwen3Config,
    param_dtype: Any = jnp.float32,
    shardings: dict | None = None,
    progress: bool = False,
) -> dict:
    """Our pure param dict from HF tensors fetched one at a time by `get_tensor(name)` (numpy, HF
    layout). Peak host memory is one stacked leaf; each leaf goes straight to its sharding."""
    np_dtype = np.dtype(param_dtype)
    expected = hf_shapes(cfg)

    def fetch(name: str) -> np.ndarray:
        value = np.asarray(get_tensor(name))
        check_array(name, value, expected, "the HF weights")  # before reshape could hide a lie
        return value

    pure: dict = {}
    for m in tqdm(tensor_maps(cfg), desc="loading HF tensors", unit="leaf", disable=not progress):
        keys = m.keys(cfg.num_hidden_layers)
        leaf = None
        for index, name in keys:
            value = m.to_ours(fetch(name))
            if leaf is None:  # stacked: [layers (, experts), *one tensor's shape]
                lead = tuple(n + 1 for n in keys[-1][0])
                leaf = np.empty((*lead, *value.shape), np_dtype)
            leaf[index] = value
        sharding = None if shardings is None else get_path(shardings, m.path)
        set_path(pure, m.path, _to_device(leaf, sharding))
        del leaf
    return pure


def _to_device(leaf: np.ndarray, sharding: NamedSharding | None) -> jax.Array:
    if sharding is None:
        return jnp.asarray(leaf)
    return jax.make_array_from_callback(leaf.shape, sharding, lambda idx: leaf[idx])


def to_host(x: Any) -> np.ndarray:
    """One tensor on the host. A global array spread over several processes (a sharded restore on a
    pod) is gathered whole onto every process: one tensor at a time, never the whole model. Every
    process must make the same calls in the same order (each gather is a collective)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(jax.device_get(x))


def params_to_hf(pure: dict, cfg: Qwen3Config, dtype: Any = None) -> Iterator[tuple[str, np.ndarray]]:
    """(HF name, numpy tensor in HF layout) one at a time; only one layer slice is on host at once."""
    for m in tensor_maps(cfg):
        leaf = get_path(pure, m.path)
        for index, name in m.keys(cfg.num_hidden_layers):
            out = np.ascontiguousarray(m.to_hf(to_host(leaf[index] if index else leaf)))
            yield name, out if dtype is None else out.astype(np.dtype(dtype))


def state_dict_to_model(model, state_dict: dict[str, Any]) -> None:
    """Load a HF state dict (name -> numpy/torch tensor) into `model` in place (tests, small models)."""

    def get(name: str) -> np.ndarray:
        t = state_dict[name]
        return t.detach().float().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)

    state = nnx.state(model, nnx.Param)
    pure = params_from_hf(get, model.config, model.param_dtype)
    nnx.replace_by_pure_dict(state, pure)
    nnx.update(model, state)


def model_to_state_dict(model, dtype: Any = None) -> dict[str, np.ndarray]:
    """HF state dict (numpy) of `model` (tests, small models)."""
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))
    return dict(params_to_hf(pure, model.config, dtype))


# --------------------------------------------------------------------------------------------
# Directory import / export


class _SafetensorsReader(contextlib.AbstractContextManager):
    """Lazy tensor access across `model.safetensors` or a sharded index."""

    def __init__(self, path: str):
        index = os.path.join(path, "model.safetensors.index.json")
        single = os.path.join(path, "model.safetensors")
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            files = sorted(set(weight_map.values()))
        elif os.path.exists(single):
            files, weight_map = ["model.safetensors"], None
        else:
            raise FileNotFoundError(f"{path} has neither model.safetensors nor model.safetensors.index.json")
        self._stack = contextlib.ExitStack()
        self._handles = {f: self._stack.enter_context(open_safetensors(os.path.join(path, f))) for f in files}
        if weight_map is None:
            weight_map = {k: files[0] for k in self._handles[files[0]].keys()}
        self.weight_map = weight_map

    def header(self, names: Iterable[str]) -> dict[str, tuple[tuple[int, ...], str]]:
        """(shape, dtype) of each of `names` present, from the files' headers (no tensor data)."""
        by_file: dict[str, list[str]] = collections.defaultdict(list)
        for name in names:
            if name in self.weight_map:
                by_file[self.weight_map[name]].append(name)
        return {k: v for f, group in by_file.items() for k, v in header(self._handles[f], group).items()}

    def get(self, name: str) -> np.ndarray:
        if name not in self.weight_map:
            raise KeyError(f"checkpoint has no tensor {name!r}")
        return self._handles[self.weight_map[name]].get_tensor(name)

    def __exit__(self, *exc) -> None:
        self._stack.close()


def load_pretrained(
    path: str | os.PathLike,
    runtime: ModelRuntime = DEFAULT_RUNTIME,
    mesh: Mesh | None = None,
    progress: bool = False,
    edit_config: Callable[[Qwen3Config], Qwen3Config] | None = None,
):
    """Qwen3ForCausalLM from a local HF directory (config.json + safetensors), streamed tensor by
    tensor into arrays placed (and sharded, given `mesh`) as they are read, executed as `runtime`
    says; `progress` shows a tqdm bar (use it for real checkpoints); `edit_config` changes the
    directory's config before the model is built (a recipe's RoPE scaling; the tensors are still
    checked against the shapes it gives)."""
    path = os.fspath(path)
    cfg = Qwen3Config.from_hf(path)
    cfg = edit_config(cfg) if edit_config is not None else cfg
    abstract = abstract_model(cfg, on_mesh(runtime, mesh))
    graphdef, state = nnx.split(abstract)
    shardings = None if mesh is None else state_shardings(state, mesh)
    with _SafetensorsReader(path) as reader:
        expected = set(hf_names(cfg))
        ignored = sorted(
            n
            for n in set(reader.weight_map) - expected
            if not (cfg.tie_word_embeddings and n == "lm_head.weight")
        )
        if ignored:
            log.warning("ignoring %d tensors not in Qwen3: %s", len(ignored), ignored[:5])
        missing = sorted(expected - set(reader.weight_map))
        if missing:
            raise ValueError(f"{path} is missing {len(missing)} Qwen3 tensors, e.g. {missing[:5]}")
        shapes = hf_shapes(cfg)  # every tensor against config.json before a byte is allocated
        check_tensors(reader.header(shapes), shapes, f"{path}/config.json")
        pure = params_from_hf(reader.get, cfg, jnp.dtype(runtime.param_dtype), shardings, progress)
    nnx.replace_by_pure_dict(state, pure)
    return nnx.merge(graphdef, state)


def _parse_size(size: int | str) -> int:
    if isinstance(size, int):
        return size
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMG]?B)\s*", size.upper())
    if not m:
        raise ValueError(f"cannot parse shard size {size!r} (use e.g. '5GB', '500MB' or bytes)")
    return int(float(m.group(1)) * {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9}[m.group(2)])


def _dtype_name(dtype: Any) -> str:
    return {"float32": "float32", "bfloat16": "bfloat16", "float16": "float16"}[np.dtype(dtype).name]


# Qwen3's recommended sampling (its model card, thinking mode), as its generation_config.json ships it.
QWEN3_SAMPLING = {"do_sample": True, "temperature": 0.6, "top_k": 20, "top_p": 0.95}


def generation_config(cfg: Qwen3Config, tokenizer: Any = None) -> dict[str, Any]:
    """generation_config.json as Qwen3's release ships it: a chat turn ends at <|im_end|> and a
    document at <|endoftext|>, so both ids stop `generate` (the turn's first: with only
    <|endoftext|>, an exported chat model writes <|im_end|> over and over); pad is <|endoftext|>.
    The ids come from `tokenizer` when given, else from Qwen3's vocabulary when the model has it."""
    eos: list[int] = []
    pad = None
    if tokenizer is not None:
        eos, pad = [tokenizer.im_end_id, tokenizer.eos_id], tokenizer.pad_id
    elif cfg.vocab_size > QWEN3_EOS_ID:
        eos, pad = [QWEN3_EOS_ID, QWEN3_BOS_ID], QWEN3_BOS_ID
    if cfg.eos_token_id is not None:
        eos.append(cfg.eos_token_id)
    out: dict[str, Any] = {}
    if cfg.bos_token_id is not None:
        out["bos_token_id"] = cfg.bos_token_id
    out.update(QWEN3_SAMPLING)
    if eos:
        eos = list(dict.fromkeys(eos))
        out["eos_token_id"] = eos if len(eos) > 1 else eos[0]
    if pad is not None:
        out["pad_token_id"] = pad
    return out


def _current_umask() -> int:
    """The process umask (reading it means setting it: restored at once)."""
    mask = os.umask(0)
    os.umask(mask)
    return mask


def save_pretrained(
    model,
    out_dir: str | os.PathLike,
    tokenizer: Any = None,
    max_shard_size: int | str = "5GB",
    dtype: Any = None,
    progress: bool = False,
) -> None:
    """Write a transformers-loadable directory: model-XXXXX-of-YYYYY.safetensors shards + index,
    config.json, generation_config.json, and the tokenizer files when `tokenizer` is given.
    `dtype` defaults to the model's param dtype. Tied models write no lm_head.weight. A model
    sharded over several processes: every process calls this, process 0 alone writes (to_host)."""
    from safetensors.numpy import save_file

    out_dir = os.fspath(out_dir)
    cfg: Qwen3Config = model.config
    dtype = np.dtype(model.param_dtype if dtype is None else dtype)
    limit = _parse_size(max_shard_size)
    pure = nnx.to_pure_dict(nnx.state(model, nnx.Param))

    # Plan shards from sizes alone (a layout change keeps the size), then stream tensors into them.
    sizes = {}
    for m in tensor_maps(cfg):
        for index, name in m.keys(cfg.num_hidden_layers):
            sizes[name] = int(np.prod(get_path(pure, m.path).shape[len(index) :])) * dtype.itemsize
    shards: list[list[str]] = [[]]
    used = 0
    for name in hf_names(cfg):
        if shards[-1] and used + sizes[name] > limit:
            shards.append([])
            used = 0
        shards[-1].append(name)
        used += sizes[name]
    files = [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))]
    shard_of = {name: files[i] for i, names in enumerate(shards) for name in names}

    # params_to_hf yields in hf_names order, so each shard is the next contiguous run of the stream.
    stream = params_to_hf(pure, cfg, dtype)
    if jax.process_index() != 0:  # several processes: all join each tensor's gather, process 0 writes
        collections.deque(stream, maxlen=0)
        return
    os.makedirs(out_dir, exist_ok=True)
    for i, names in enumerate(
        tqdm(shards, desc="writing safetensors shards", unit="shard", disable=not progress)
    ):
        path = os.path.join(out_dir, files[i])
        save_file(dict(itertools.islice(stream, len(names))), path, metadata={"format": "pt"})
        # safetensors writes a private (0600) temporary file and renames it: give the shard the mode
        # every other exported file gets from the umask, so colleagues and servers can read it.
        os.chmod(path, 0o666 & ~_current_umask())
    index = {"metadata": {"total_size": sum(sizes.values())}, "weight_map": shard_of}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(cfg.to_hf(_dtype_name(dtype)), f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump(generation_config(cfg, tokenizer), f, indent=2)
    if tokenizer is not None:
        tokenizer.save_hf(out_dir)
