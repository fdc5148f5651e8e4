"""A scripted episode's transcript laid out as the rollout engine holds it under a context budget.

The scripted experts (sandbox.expert_session) act on an EpisodeEnv and never see tokens. What their
episode looks like under `rollout.context_budget` -- its segments, the largest context a turn saw,
the tokens trained over its segments, what its last context still shows -- comes from laying the
transcript out token for token as a rollout record (b2tjax.sft.traces.encode_trace's layout: the
prompt ids, each assistant turn encoded + <|im_end|>, each reply through
`rollout.render.render_env_reply`) and folding it with the engine's own `ContextBudget.make_room`
where rollout/actions.py's `_continue` calls it, a new segment starting from the folded context as
`_next_segment` starts one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from rollout.context import ContextBudget, Reply, measures
from rollout.render import render_env_reply


@dataclasses.dataclass(frozen=True)
class Replayed:
    """One episode under a budget: each segment's length (its record's ids, prompt included) and
    the context its first turn started from, the episode's length without a budget, whether it
    ended with StopReason.CONTEXT_BUDGET, and the replies its last segment holds (which blocks are
    stubs)."""

    segments: list[int]
    starts: list[int]
    unfolded: int
    stopped: bool
    replies: list[Reply]

    @property
    def peak(self) -> int:
        """The largest context any turn of the episode saw (a segment's whole length)."""
        return max(self.segments)

    @property
    def trained(self) -> int:
        """Tokens over all segments, each segment's folded prompt included: what training reads."""
        return sum(self.segments)

    @property
    def live(self) -> float:
        """A row's mean live length over the episode: each segment's mean of its start and end,
        weighted by the tokens it adds (the turns and replies a row holds it for)."""
        added = [end - start for start, end in zip(self.starts, self.segments)]
        mean = [(start + end) / 2 for start, end in zip(self.starts, self.segments)]
        return sum(a * m for a, m in zip(added, mean)) / max(sum(added), 1)

    def shown(self) -> str:
        """The text of the replies the last segment shows whole (memory replies and unfolded tool
        replies): what an answer written there can still read."""
        return "\n".join(
            block.content
            for reply in self.replies
            for block, folded in zip(reply.blocks, reply.folded)
            if not folded
        )


def replay(
    prompt: Sequence[int],
    turns: Sequence[dict[str, str]],
    replies: Sequence[Sequence[Any]],
    tokenizer: Any,
    budget: ContextBudget,
    turn_room: int,
) -> Replayed:
    """Lay out `turns` (alternating assistant / user messages after the prompt, as
    sandbox.expert_session records them) after `prompt` ids, folding under `budget` with
    `turn_room` (rollout.max_turn_tokens) kept for the next turn; `replies[k]`: the response blocks
    (sandbox.env.Response) of the k-th user message."""
    pieces = []
    for message in turns:
        if message["role"] == "assistant":
            pieces.append(list(tokenizer.encode(message["content"])) + [tokenizer.im_end_id])
        else:
            pieces.append(render_env_reply(tokenizer, message["content"]))
    unfolded = len(prompt) + sum(len(p) for p in pieces)
    ids, held, segments, starts, done = list(prompt), [], [], [len(prompt)], 0
    measure = measures(tokenizer)
    for message, piece in zip(turns, pieces):
        if message["role"] == "assistant":
            ids += piece
            done += 1
            continue
        folded = budget.make_room(ids, held, len(piece), done, turn_room, measure)
        if folded is not None and not folded.fits:
            return Replayed([*segments, len(ids)], starts, unfolded, True, held)
        if folded is not None:
            segments.append(len(ids))
            starts.append(len(folded.ids) + len(piece))
            ids, held = list(folded.ids), list(folded.replies)
        blocks = tuple(replies[done - 1])
        if blocks:
            held.append(Reply(done - 1, len(ids), len(ids) + len(piece), blocks))
        ids += piece
    return Replayed([*segments, len(ids)], starts, unfolded, False, held)
