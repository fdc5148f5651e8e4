"""One chat completion, start to end, without HTTP: request -> prompt ids -> engine -> OpenAI's
response body (with the token-level extensions an RL user needs: `prompt_token_ids`, and per choice
`token_ids` and `token_logprobs`, the engine's records' log-probs). A tool call that `tool_choice`
opened for the model ends `prompt_token_ids`: given, not sampled, as a record's environment tokens.

Log-probs are the records' (rollout/sampling.py): log_softmax(logits / T) of the sampled token,
at T = 1 for greedy requests. `top_logprobs` alternatives come from one forward of their own over
the prompt and the choice, on the sampler's weights (`ModelRunner.alternatives`, off the engine's
thread): the same distribution, recomputed, so in bf16 a sampled token's own entry there may differ
from its recorded `logprob` by rounding. `max_tokens` (default: the engine's `rollout.max_turn_tokens`) is
capped by what the context has room for. The engine decodes a turn in segments of
`rollout.max_turn_tokens`, between which new requests join the batch; a longer completion goes on
as further pieces, each continuing the ids so far (their KV found in the rows by prefix reuse),
joined into one record. While a streamed reply decodes, segments are `stream_segment` steps short
and its row's new tokens go to the client after each (the same tokens: sampling keys follow
positions, never segments).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Callable
from typing import Any

from rollout.config import RolloutConfig
from rollout.record import EpisodeRecord
from rollout.sampling import StreamSampling
from rollout.serve.chat import TurnCache, assistant_message
from rollout.serve.deltas import stable_text
from rollout.serve.schema import ApiError, ChatRequest
from rollout.serve.sessions import SessionBook
from rollout.serve.worker import EngineWorker, ServedEpisode
from sandbox.types import StopReason

_LENGTH = (StopReason.MAX_TURN_TOKENS, StopReason.MAX_TOTAL_TOKENS)


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A checked request's prompt ids and the most tokens a choice may sample."""

    prompt: list[int]
    limit: int


class ChatService:
    """The endpoint's logic over one engine worker; safe to call from the event loop's tasks."""

    def __init__(
        self,
        worker: EngineWorker,
        config: RolloutConfig,
        model_name: str,
        sessions: SessionBook,
        stream_segment: int,
    ):
        """`stream_segment`: a streamed reply's decode segment (StreamSampling.segment), at most
        `config.max_turn_tokens`."""
        self.worker, self.config, self.model_name, self.sessions = worker, config, model_name, sessions
        self.stream_segment = stream_segment
        self.tokenizer = worker.engine.tokenizer
        self.turns = TurnCache()

    def prepare(self, req: ChatRequest) -> Prepared:
        """The request's prompt ids and token limit, or ApiError (400) before anything runs."""
        try:
            # a call's given opening (tool_choice) is prompt: the engine was given it, not sampled it
            prompt = self.turns.prompt_ids(self.tokenizer, req.messages, req.tools)
            prompt += self.tokenizer.encode(req.call_start) if req.call_start else []
        except (ValueError, KeyError, TypeError) as err:
            raise ApiError(400, f"cannot render the messages: {err}", param="messages") from None
        room = self.config.max_seq_len - len(prompt) - 1
        if room < 1:
            raise ApiError(
                400,
                f"the prompt has {len(prompt)} tokens; this server's context is {self.config.max_seq_len}",
                param="messages",
            )
        return Prepared(prompt, min(req.max_tokens or self.config.max_turn_tokens, room))

    async def complete(
        self,
        req: ChatRequest,
        prepared: Prepared,
        session: str | None,
        instance: str | None,
        on_piece: Callable[[int, list[int]], None] | None = None,
    ) -> dict[str, Any]:
        """The response body; `on_piece(k, ids)` (a streamed reply) hears choice k's sampled ids so
        far, on the event loop, after every decode segment of `stream_segment` steps and every piece."""
        prompt, name = prepared.prompt, instance or "request"
        records = await asyncio.gather(
            *(self._decode(name, prepared, self._sampling(req, k), k, on_piece) for k in range(req.n))
        )
        choices = [self._choice(req, k, prompt, r) for k, r in enumerate(records)]
        if req.top_logprobs:
            await asyncio.gather(*(self._add_alternatives(req, prompt, c) for c in choices))
        if session is not None:
            self.sessions.add(session, instance or session, prompt, records[0])
        completion = sum(len(c["token_ids"]) for c in choices)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": choices,
            "usage": {
                "prompt_tokens": len(prompt),
                "completion_tokens": completion,
                "total_tokens": len(prompt) + completion,
            },
            "prompt_token_ids": prompt,
        }

    async def _decode(
        self,
        instance: str,
        prepared: Prepared,
        sampling: StreamSampling,
        k: int,
        on_piece: Callable[[int, list[int]], None] | None,
    ) -> EpisodeRecord:
        """One choice of up to `prepared.limit` sampled tokens, in pieces of at most a decode
        segment: a piece cut at its cap is continued by the next from the ids so far (the sampler's
        keys follow the position, so the pieces draw what one long turn would)."""
        prompt, limit = prepared.prompt, prepared.limit
        record = EpisodeRecord(instance)
        record.append(prompt, sampled=False)
        on_tokens = None
        if on_piece is not None:  # a streamed reply: its row's tokens after every (short) segment
            loop = asyncio.get_running_loop()

            def on_tokens(ids: list[int]) -> None:  # on the engine's thread
                loop.call_soon_threadsafe(on_piece, k, ids[len(prompt) :])

        while True:
            piece = min(limit - (len(record.ids) - len(prompt)), self.config.max_turn_tokens)
            episode = ServedEpisode(instance, list(record.ids), piece, sampling, on_tokens)
            (future,) = self.worker.submit([episode])
            part = await asyncio.wrap_future(future)
            start = len(record.ids)
            record.append(part.ids[start:], sampled=True, logprobs=part.logprobs[start:])
            record.stop_reason, record.error_message = part.stop_reason, part.error_message
            if on_piece is not None:
                on_piece(k, record.ids[len(prompt) :])
            if part.stop_reason != StopReason.MAX_TURN_TOKENS or len(record.ids) - len(prompt) >= limit:
                return record

    def _turn(self, ids: list[int]) -> tuple[list[int], bool]:
        """Sampled `ids` without the token that ended the turn, and whether one did."""
        ended = bool(ids) and ids[-1] in (self.tokenizer.im_end_id, self.tokenizer.eos_id)
        return (ids[:-1] if ended else ids), ended

    def stable_text(self, ids: list[int]) -> str:
        """The text of sampled `ids` (without the token that ended the turn) that more tokens
        cannot change (rollout/serve/deltas.py `stable_text`)."""
        return stable_text(self.tokenizer.decode, self._turn(ids)[0])

    def _sampling(self, req: ChatRequest, k: int) -> StreamSampling:
        seed = None if req.seed is None else req.seed + k
        segment = self.stream_segment if req.stream else None
        return StreamSampling(req.temperature, req.top_p, req.top_k, seed, segment)

    def _choice(self, req: ChatRequest, k: int, prompt: list[int], record: EpisodeRecord) -> dict[str, Any]:
        if record.stop_reason == StopReason.ERROR:
            raise ApiError(500, f"the engine failed the request: {record.error_message}", kind="server_error")
        ids, logprobs = record.ids[len(prompt) :], record.logprobs[len(prompt) :]
        body, ended = self._turn(ids)
        text, cut = self._cut_at_stop(self.tokenizer.decode(body), req.stop)
        if cut is not None:  # a stop string: the tokens up to the one completing it
            ids = next(
                body[:n] for n in range(1, len(body) + 1) if self.tokenizer.decode(body[:n]).find(cut) >= 0
            )
            logprobs = logprobs[: len(ids)]
        message, calls = assistant_message(req.call_start + text, req.parse_tools)
        length = record.stop_reason in _LENGTH and cut is None
        finish = "length" if length else "tool_calls" if calls else "stop"
        if ended and cut is None:  # the exact ids of this conversation, for the agent's next turn
            self.turns.put([*req.messages, message], req.tools, prompt + ids)
        choice = {"index": k, "message": message, "finish_reason": finish, "token_ids": ids}
        choice["token_logprobs"] = logprobs
        choice["logprobs"] = self._logprobs(ids, logprobs) if req.logprobs else None
        return choice

    @staticmethod
    def _cut_at_stop(text: str, stops: tuple[str, ...]) -> tuple[str, str | None]:
        """`text` before its first stop string, and that string (None: no stop string in it)."""
        found = [(text.find(s), s) for s in stops if s in text]
        if not found:
            return text, None
        at, stop = min(found)
        return text[:at], stop

    def _entry(self, token: int, logprob: float) -> dict[str, Any]:
        piece = self.tokenizer.decode([token])
        return {"token": piece, "logprob": logprob, "bytes": list(piece.encode())}

    def _logprobs(self, ids: list[int], logprobs: list[float]) -> dict[str, Any]:
        return {"content": [{**self._entry(t, lp), "top_logprobs": []} for t, lp in zip(ids, logprobs)]}

    async def _add_alternatives(self, req: ChatRequest, prompt: list[int], choice: dict[str, Any]) -> None:
        """Fill each token's `top_logprobs` with the `req.top_logprobs` likeliest at its position."""
        ids = choice["token_ids"]
        if not ids:
            return
        runner = self.worker.engine.runner
        top, lps = await asyncio.to_thread(runner.alternatives, prompt + ids, len(prompt), req.temperature)
        for entry, row_ids, row_lps in zip(choice["logprobs"]["content"], top, lps):
            entry["top_logprobs"] = [
                self._entry(int(t), float(lp)) for t, lp in zip(row_ids[: req.top_logprobs], row_lps)
            ]
