"""Small SentencePiece tokenizers trained on our own corpus (fast option for tiny CPU models).

Training options are chosen so text round-trips exactly (``decode(encode(x)) == x``) and the chat
format works unchanged:
  * every chat/agent marker (``CHAT_SYMBOLS``) is a user-defined symbol: always one id, matched
    atomically anywhere in the text, like Hugging Face added tokens;
  * ``byte_fallback``: characters outside the vocabulary (rare Chinese, emoji) become byte pieces
    instead of ``<unk>``;
  * identity normalization, no extra-whitespace removal, no dummy prefix: spaces, tabs, newlines
    and leading whitespace survive;
  * no BOS/EOS/PAD control ids: ``<|endoftext|>`` plays EOS and PAD, as in Qwen.
Known limit: the character U+2581 (``▁``, SentencePiece's space marker) decodes as a space.

``save_hf`` writes ``tokenizer.json`` (the model converted to a Hugging Face BPE with byte
fallback: SentencePiece's score order becomes the merge order, user-defined symbols become added
tokens, spaces map to ``▁``), ``tokenizer_config.json`` (Qwen3's chat template, ``<|im_end|>`` as
EOS, ``<|endoftext|>`` as PAD) and a copy of the ``.model``.  Tests check that the converted
tokenizer gives the same ids as SentencePiece.  ``load_tokenizer(dir)`` then uses the
``tokenizer.json`` (Hugging Face semantics), like ``transformers.AutoTokenizer``.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as spm_pb
from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers

from models.bpe_from_ranks import last_merge
from models.token_ids import ENDOFTEXT, IM_END, IM_START, ChatTokenIds, decode_padded, qwen3_reference_config

CHAT_SYMBOLS: tuple[str, ...] = (
    ENDOFTEXT,
    IM_START,
    IM_END,
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<memory>",
    "</memory>",
    "<memory_response>",
    "</memory_response>",
    "<answer>",
    "</answer>",
)
MAX_SENTENCE_BYTES = 4096  # SentencePiece silently skips longer training "sentences"


def _chunks(texts: Iterable[str], max_bytes: int = MAX_SENTENCE_BYTES) -> Iterator[str]:
    """Split long texts at line ends (keeping the newlines) so no training example is dropped."""
    for text in texts:
        if not isinstance(text, str):
            raise TypeError(f"training texts must be str, got {type(text).__name__}")
        buf, size = [], 0
        for line in text.splitlines(keepends=True):
            n = len(line.encode("utf-8"))
            if buf and size + n > max_bytes:
                yield "".join(buf)
                buf, size = [], 0
            if n > max_bytes:  # one huge line: cut by characters
                step = max(1, max_bytes // 4)
                for i in range(0, len(line), step):
                    yield line[i : i + step]
                continue
            buf.append(line)
            size += n
        if buf:
            yield "".join(buf)


def train_sentencepiece(
    texts: Iterable[str],
    out_prefix: str | Path,
    vocab_size: int = 4096,
    extra_symbols: Iterable[str] = (),
) -> Path:
    """Train a SentencePiece model on ``texts``; returns the path of ``{out_prefix}.model``.

    ``vocab_size`` is an upper bound: a small corpus yields fewer pieces rather than an error.
    """
    symbols = list(dict.fromkeys([*CHAT_SYMBOLS, *extra_symbols]))
    min_size = len(symbols) + 256 + 2  # <unk> + symbols + byte pieces + something learnt
    if vocab_size < min_size:
        raise ValueError(f"vocab_size must be >= {min_size} (chat symbols + 256 byte pieces)")
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=_chunks(texts),
        model_writer=model,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        model_type="bpe",  # BPE converts exactly to tokenizer.json (save_hf)
        user_defined_symbols=symbols,
        byte_fallback=True,
        character_coverage=1.0,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        allow_whitespace_only_pieces=True,
        split_digits=True,
        max_sentence_length=MAX_SENTENCE_BYTES,
        input_sentence_size=2_000_000,  # sample big corpora instead of exhausting memory
        shuffle_input_sentence=True,
        unk_id=0,
        bos_id=-1,
        eos_id=-1,
        pad_id=-1,
        minloglevel=2,
    )
    path = Path(f"{out_prefix}.model")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(model.getvalue())
    return path


class SentencePieceTokenizer(ChatTokenIds):
    """A SentencePiece model behind the b2tjax tokenizer interface."""

    def __init__(self, model_path: str | Path):
        self.model_path = Path(model_path)
        self._sp = spm.SentencePieceProcessor(model_file=str(self.model_path))
        self.name = self.model_path.stem
        self._find_chat_ids(f"train {self.model_path} with train_sentencepiece")

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"encode expects str, got {type(text).__name__}")
        return self._sp.encode(text)

    def encode_text(self, text: str) -> list[int]:
        """`text` with the special symbols written in it as plain text (HFTokenizer.encode_text):
        each is encoded as its first character and the rest, neither of which is the symbol."""
        if not isinstance(text, str):
            raise TypeError(f"encode_text expects str, got {type(text).__name__}")
        ids: list[int] = []
        for piece in _SPECIAL_SPLIT.split(text):
            parts = (piece[:1], piece[1:]) if piece in _SPECIAL else (piece,)
            ids += [i for part in parts if part for i in self._sp.encode(part)]
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        return self._sp.encode(list(texts))

    def decode(self, ids: list[int]) -> str:
        return decode_padded(self._sp.decode, ids, self.vocab_size)

    def token_to_id(self, token: str) -> int:
        i = self._sp.piece_to_id(token)
        if self._sp.id_to_piece(i) != token:
            raise KeyError(f"{token!r} is not a single token of {self.name}")
        return i

    def save_hf(self, out_dir: str | Path) -> None:
        """Write tokenizer.json + tokenizer_config.json (+ tokenizer.model) for ``transformers``."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        sentencepiece_to_hf(self.model_path).save(str(out / "tokenizer.json"))
        (out / "tokenizer_config.json").write_text(
            json.dumps(_hf_config(self), indent=2, ensure_ascii=False) + "\n"
        )
        dst = out / "tokenizer.model"
        if not dst.exists() or dst.resolve() != self.model_path.resolve():
            shutil.copyfile(self.model_path, dst)


_SPECIAL = (ENDOFTEXT, IM_START, IM_END)  # "special" in HF terms (skipped by skip_special_tokens)
_SPECIAL_SPLIT = re.compile("(" + "|".join(map(re.escape, _SPECIAL)) + ")")


def sentencepiece_to_hf(model_path: str | Path) -> Tokenizer:
    """Convert a BPE SentencePiece model trained by ``train_sentencepiece`` to a ``tokenizers.Tokenizer``.

    SentencePiece BPE repeatedly joins the adjacent pair whose concatenation has the best score;
    ranking the pieces by score and recovering each piece's last merge (``last_merge``) gives a
    merge list with the same behaviour in Hugging Face's BPE.
    """
    proto = spm_pb.ModelProto()
    proto.ParseFromString(Path(model_path).read_bytes())
    kinds = spm_pb.ModelProto.SentencePiece
    if proto.trainer_spec.model_type != spm_pb.TrainerSpec.BPE:
        raise ValueError(f"{model_path}: only BPE SentencePiece models convert to tokenizer.json")
    spec = proto.normalizer_spec
    if spec.name != "identity" or spec.add_dummy_prefix or spec.remove_extra_whitespaces:
        raise ValueError(
            f"{model_path}: train with train_sentencepiece (identity normalization, no dummy prefix)"
        )
    pieces = list(proto.pieces)
    vocab = {p.piece: i for i, p in enumerate(pieces)}
    by_score = sorted(
        (i for i, p in enumerate(pieces) if p.type == kinds.NORMAL), key=lambda i: (-pieces[i].score, i)
    )
    ranks = {pieces[i].piece: r for r, i in enumerate(by_score)}
    merges = [last_merge(piece, r, ranks) for piece, r in ranks.items() if len(piece) >= 2]
    unk = next(p.piece for p in pieces if p.type == kinds.UNKNOWN)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token=unk, fuse_unk=True, byte_fallback=True))
    tok.normalizer = normalizers.Replace(" ", "\u2581")
    tok.decoder = decoders.Sequence(
        [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    )
    for i, p in enumerate(pieces):
        if p.type == kinds.USER_DEFINED:
            added = AddedToken(p.piece, normalized=False, special=p.piece in _SPECIAL)
            (tok.add_special_tokens if p.piece in _SPECIAL else tok.add_tokens)([added])
            if tok.token_to_id(p.piece) != i:
                raise ValueError(f"{model_path}: symbol {p.piece!r} would move from id {i}")
    return tok


def _hf_config(tok: SentencePieceTokenizer) -> dict:
    """tokenizer_config.json for a converted model: Qwen3's chat fields, our symbols' ids."""
    reference = qwen3_reference_config()
    decoder = {}
    for sym in CHAT_SYMBOLS:
        try:
            i = tok.token_to_id(sym)
        except KeyError:
            continue
        decoder[str(i)] = {
            "content": sym,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": sym in _SPECIAL,
        }
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [IM_START, IM_END],
        "bos_token": None,
        "eos_token": IM_END,
        "pad_token": ENDOFTEXT,
        "unk_token": None,
        "add_bos_token": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "model_max_length": reference["model_max_length"],
        "chat_template": reference["chat_template"],
    }


__all__ = ["CHAT_SYMBOLS", "train_sentencepiece", "SentencePieceTokenizer", "sentencepiece_to_hf"]
