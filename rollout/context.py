"""The context budget: when a stream's next turn would not fit `rollout.context_budget` tokens, its
oldest tool replies are replaced by short stubs and the stream goes on in a new *segment*.

Why segments: a sampled token is trained on exactly the context it was sampled from. Folding
rewrites the middle of the context, so the tokens after it are sampled from a context that is no
longer an extension of the old one; the old record ends there (StopReason.FOLDED) and a new record
of the same stream starts with the folded context as its prompt (mask 0, the earlier turns
included). Each segment keeps its own ids, masks, log-probs, versions and routes; the segments of an
episode share its group, reward and advantage, and each sampled token lies in exactly one segment.

What folds: the tool replies (`Reply.blocks`, kind tool) of turns older than the last
`keep_turns`, oldest first, until the context with the new reply is at most half the budget (an
episode then has few segments). Never the prompt (system, request, behavior trajectory), memory
replies, replies the environment did not give as blocks, or a block whose stub would not be
shorter. If folding everything foldable still leaves no room for a whole next turn, the stream ends
with StopReason.CONTEXT_BUDGET. A folded reply is re-rendered through the same reply template
(`rollout.render`), so the context stays exactly Qwen3's chat template of the folded messages.
Budget 0 is off: no stream ever folds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from rollout.render import render_env_reply
from sandbox.types import ResponseKind


@dataclasses.dataclass(frozen=True)
class Reply:
    """An environment reply in a stream's context: the turn it answers (counted over the episode's
    turns of this stream), its span [start, end) in the current segment's ids, and its response
    blocks (sandbox.env.Response) as the environment gave them; `folded[i]`: block i is a stub."""

    turn: int
    start: int
    end: int
    blocks: tuple[Any, ...]
    folded: tuple[bool, ...] = ()

    def __post_init__(self) -> None:
        if not self.folded:
            object.__setattr__(self, "folded", (False,) * len(self.blocks))


@dataclasses.dataclass(frozen=True)
class Folded:
    """A folded context: its ids (without the new reply), its replies' new spans, what folding
    took away (`blocks`, `tokens`), and whether the next turn fits after it (else the stream ends
    with StopReason.CONTEXT_BUDGET)."""

    ids: list[int]
    replies: list[Reply]
    blocks: int
    tokens: int
    fits: bool = True


# reply body -> its tokens (rollout.render.render_env_reply with the run's tokenizer)
RenderReply = Callable[[str], list[int]]
# a block's text -> its token count
CountTokens = Callable[[str], int]


def measures(tokenizer: Any) -> tuple[RenderReply, CountTokens]:
    """How a fold renders a reply and counts a block's tokens, with the run's tokenizer."""
    return (lambda body: render_env_reply(tokenizer, body)), (lambda text: len(tokenizer.encode_text(text)))


@dataclasses.dataclass(frozen=True)
class ContextBudget:
    """`rollout.context_budget` and `rollout.context_keep_turns`, resolved once per run."""

    tokens: int  # 0: off
    keep_turns: int

    @classmethod
    def of(cls, rollout: Any) -> ContextBudget:
        """The budget a RolloutConfig names (the engine's run and a scripted replay alike)."""
        return cls(rollout.context_budget, rollout.context_keep_turns)

    def fits(self, context: int, turn_room: int) -> bool:
        """A context of `context` tokens (the new reply included) leaves room for a whole next turn
        of `turn_room` tokens."""
        return not self.tokens or context + turn_room <= self.tokens

    def make_room(
        self,
        ids: Sequence[int],
        replies: Sequence[Reply],
        added: int,
        turns_done: int,
        turn_room: int,
        measure: tuple[RenderReply, CountTokens],
    ) -> Folded | None:
        """None when the context with `added` new tokens leaves room for a next turn of `turn_room`;
        else the folded context (`fold`), its `fits` saying whether the next turn fits after it.
        The one decision of the engine (rollout/actions.py) and of a scripted replay
        (rollout/replay.py)."""
        if self.fits(len(ids) + added, turn_room):
            return None
        folded = self.fold(ids, replies, added, turns_done, *measure)
        return dataclasses.replace(folded, fits=self.fits(len(folded.ids) + added, turn_room))

    def fold(
        self,
        ids: Sequence[int],
        replies: Sequence[Reply],
        added: int,
        turns_done: int,
        render: RenderReply,
        count: CountTokens,
    ) -> Folded:
        """Fold the oldest foldable blocks of `replies` (spans in `ids`) until the context plus
        `added` tokens (the new reply and any forced start) is at most half the budget, or nothing
        foldable is left. `turns_done`: the stream's finished turns (the new reply answers the last).
        Cost: one rendering of a reply per block folded in it."""
        bodies = [list(r.blocks) for r in replies]
        states = [list(r.folded) for r in replies]
        rendered: dict[int, list[int]] = {}
        total = len(ids) + added
        blocks = removed = 0
        for i, reply in enumerate(replies):
            if reply.turn >= turns_done - self.keep_turns:
                break  # replies are in turn order: the rest are kept
            for j, block in enumerate(reply.blocks):
                if total <= self.tokens // 2:
                    break
                if block.kind is not ResponseKind.TOOL or states[i][j]:
                    continue
                body = bodies[i][:j] + [block.folded(count(block.content))] + bodies[i][j + 1 :]
                tokens = render("\n".join(b.render() for b in body))
                length = len(rendered[i]) if i in rendered else reply.end - reply.start
                if len(tokens) >= length:
                    continue  # a stub no shorter than the reply it replaces
                bodies[i], rendered[i], states[i][j] = body, tokens, True
                total -= length - len(tokens)
                blocks, removed = blocks + 1, removed + length - len(tokens)
        out: list[int] = []
        new_replies: list[Reply] = []
        cursor = 0
        for i, reply in enumerate(replies):
            out.extend(ids[cursor : reply.start])
            start = len(out)
            out.extend(rendered[i] if i in rendered else ids[reply.start : reply.end])
            new_replies.append(Reply(reply.turn, start, len(out), tuple(bodies[i]), tuple(states[i])))
            cursor = reply.end
        out.extend(ids[cursor:])
        return Folded(out, new_replies, blocks, removed)
