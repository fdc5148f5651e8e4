"""Turn tiktoken-style BPE ranks into a byte-level BPE vocabulary and merge list.

tiktoken stores only ``token bytes -> rank``; Hugging Face's BPE model needs explicit merges.
A rank table from BPE training has the property that every token of length >= 2 is produced by
running BPE on its own bytes with all lower-ranked tokens: the last step joins exactly two
pieces, and that pair is the token's merge.  Replaying that per token recovers one merge per
token, in rank order, which is what a ``merges.txt`` from training would contain.
"""

from __future__ import annotations

import base64
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

Piece = TypeVar("Piece", str, bytes)


@lru_cache(maxsize=1)
def byte_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (the ByteLevel alphabet)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    mapping = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in mapping:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


def bytes_to_symbol(token: bytes) -> str:
    """A token's bytes spelled in the ByteLevel alphabet, as tokenizer.json vocabularies store them."""
    table = byte_to_unicode()
    return "".join(table[b] for b in token)


def load_tiktoken_ranks(path: str | Path) -> dict[bytes, int]:
    """Read a ``.tiktoken`` file (one ``base64(token) rank`` per line)."""
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for line_no, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                token_b64, rank = line.split()
                ranks[base64.b64decode(token_b64)] = int(rank)
            except ValueError as e:
                raise ValueError(f"{path}:{line_no}: expected 'base64 rank', got {line[:60]!r}") from e
    return ranks


def last_merge(token: Piece, rank: int, ranks: dict[Piece, int]) -> tuple[Piece, Piece]:
    """BPE ``token``'s units (bytes, or characters for a str) using only ranks below ``rank``;
    return the final two pieces, i.e. the merge that created ``token``."""
    parts = [token[i : i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best_i, best_rank = -1, rank
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < best_rank:
                best_i, best_rank = i, r
        if best_i < 0:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    if len(parts) != 2:
        raise ValueError(
            f"rank table is not BPE-consistent: token {token!r} (rank {rank}) does not reduce to two pieces"
        )
    return parts[0], parts[1]


def ranks_to_vocab_and_merges(
    ranks: dict[bytes, int],
) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """ByteLevel vocab (symbol string -> id, id == rank) and merges ordered by the merged token's rank."""
    if sorted(ranks.values()) != list(range(len(ranks))):
        raise ValueError("ranks must be exactly 0..N-1")
    vocab = {bytes_to_symbol(tok): r for tok, r in ranks.items()}
    merges: list[tuple[str, str]] = []
    for tok, r in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(tok) < 2:
            continue
        left, right = last_merge(tok, r, ranks)
        merges.append((bytes_to_symbol(left), bytes_to_symbol(right)))
    return vocab, merges
