"""What every tokenizer of ours shares: the chat-control ids, the interface, padded-id decoding.

Kept apart from `models.tokenizer` (the Qwen3 BPE and the loader) so that `models.spm` can build on
it while the loader imports `models.spm`, without the two importing each other.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Protocol, runtime_checkable

from models.chat import IM_END, IM_START

ENDOFTEXT = "<|endoftext|>"
QWEN3_CONFIG_FILE = "qwen3_tokenizer_config.json"

__all__ = [
    "ENDOFTEXT",
    "IM_END",
    "IM_START",
    "UNUSED_ID_TEXT",
    "ChatTokenIds",
    "TokenizerLike",
    "decode_padded",
    "qwen3_reference_config",
]


@runtime_checkable
class TokenizerLike(Protocol):
    """What the rest of b2tjax may rely on (docs/ARCHITECTURE.md, models API)."""

    name: str

    def encode(self, text: str) -> list[int]: ...
    def encode_text(self, text: str) -> list[int]: ...  # special tokens in `text` read as text
    def turn_text(self, ids: list[int]) -> str: ...  # a sampled turn's text, as the environment parses it
    def decode(self, ids: list[int]) -> str: ...
    def token_to_id(self, token: str) -> int: ...
    def save_hf(self, out_dir: str | Path) -> None: ...
    @property
    def vocab_size(self) -> int: ...
    @property
    def im_start_id(self) -> int: ...
    @property
    def im_end_id(self) -> int: ...
    @property
    def eos_id(self) -> int: ...
    @property
    def pad_id(self) -> int: ...


def qwen3_reference_config() -> dict:
    """Qwen3's tokenizer_config.json (package data copied from the spec; includes the chat template)."""
    text = resources.files("models.data").joinpath(QWEN3_CONFIG_FILE).read_text(encoding="utf-8")
    return json.loads(text)


class ChatTokenIds:
    """The chat-control ids both tokenizers expose; subclasses call `_find_chat_ids` once built.

    Padding uses `<|endoftext|>`, as Qwen3 does.
    """

    name: str
    _im_start: int
    _im_end: int
    _eos: int

    def _find_chat_ids(self, hint: str) -> None:
        """Look up the chat framing tokens with the subclass's `token_to_id` (KeyError when absent), failing
        loudly (with `hint`) for a vocabulary without them."""
        try:
            self._im_start, self._im_end, self._eos = (
                self.token_to_id(t) for t in (IM_START, IM_END, ENDOFTEXT)
            )
        except KeyError as e:
            raise ValueError(f"tokenizer {self.name!r} lacks a chat token ({e.args[0]}); {hint}") from None

    @property
    def im_start_id(self) -> int:
        return self._im_start

    @property
    def im_end_id(self) -> int:
        return self._im_end

    @property
    def eos_id(self) -> int:
        return self._eos

    @property
    def pad_id(self) -> int:
        return self._eos

    def turn_text(self, ids: list[int]) -> str:
        """The text of a sampled turn as the environment parses it: decoded without the one stop
        token (`<|im_end|>` or `<|endoftext|>`) that closed it; any other special token the model
        wrote stays in the text (and makes the turn an error). The report reads turns through this
        too, so it shows the error the environment answered."""
        closed = bool(ids) and ids[-1] in (self._im_end, self._eos)
        return self.decode(list(ids[:-1]) if closed else list(ids))  # type: ignore[attr-defined]


UNUSED_ID_TEXT = "\ufffd"


def decode_padded(decode_run, ids, vocab_size: int) -> str:
    """Decode ``ids`` where ids >= vocab_size (the model's padded embedding rows) read as U+FFFD.

    Models pad their vocabulary (Qwen3: 151,936 rows for 151,669 tokens); a sampler that does not
    mask those rows must get text back, not a crash mid-job.  Negative ids are a caller bug.
    """
    ids = [int(i) for i in ids]
    if any(i < 0 for i in ids):
        raise ValueError(f"negative token ids: {[i for i in ids if i < 0][:5]}")
    parts, run = [], []
    for i in ids:
        if i < vocab_size:
            run.append(i)
            continue
        if run:
            parts.append(decode_run(run))
            run = []
        parts.append(UNUSED_ID_TEXT)
    if run or not parts:
        parts.append(decode_run(run))
    return "".join(parts)
