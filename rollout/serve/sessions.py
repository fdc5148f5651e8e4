"""An outside agent's session (requests with the same session header) recorded as one episode in
the records' format (rollout/record.py), so `launch/eval.py --records` scores it and a trainer can
read it like launch/rollouts.py's output.

A turn whose prompt continues the session's record token for token (the agent resent the
conversation with the server's reply and its tool results: chat.TurnCache keeps those ids exact)
extends that record: the new context with mask 0, the sampled tokens with mask 1 and their
log-probs. A turn that does not (the agent rewrote its history) starts another stream of the same
episode ("branch1", ...; role "branch", so the file's answering stream stays "main"). Closing the
session sets the answer on "main" and appends the episode's lines to the records file.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path
from typing import Any

from rollout.record import EpisodeRecord, StreamTag
from sandbox.types import StopReason


@dataclasses.dataclass
class Session:
    episode: int
    records: list[EpisodeRecord] = dataclasses.field(default_factory=list)


class SessionBook:
    """Open sessions by id; `path` (None: no recording) is the JSONL file closed sessions append to."""

    def __init__(self, path: Path | None, tokenizer_spec: str):
        self.path, self.tokenizer_spec = path, tokenizer_spec
        self.open: dict[str, Session] = {}
        self.episodes = 0
        self.lock = threading.Lock()

    def add(self, session_id: str, instance_id: str, prompt: list[int], turn: EpisodeRecord) -> None:
        """Record one served turn (`turn`: its engine record, prompt + completion)."""
        with self.lock:
            session = self.open.get(session_id)
            if session is None:
                session = self.open[session_id] = Session(self.episodes)
                self.episodes += 1
            record = next((r for r in reversed(session.records) if prompt[: len(r.ids)] == r.ids), None)
            if record is None:
                record = self._new_stream(session, instance_id)
            record.append(prompt[len(record.ids) :], sampled=False)
            start = len(record.ids)
            done = turn.ids[len(prompt) :]
            record.append(done, sampled=True, logprobs=turn.logprobs[len(prompt) :])
            record.turns.append((start, len(record.ids)))
            record.stop_reason = turn.stop_reason

    def _new_stream(self, session: Session, instance_id: str) -> EpisodeRecord:
        n = len(session.records)
        tag = StreamTag("agent") if n == 0 else StreamTag("branch")
        record = EpisodeRecord(
            instance_id,
            stream="main" if n == 0 else f"branch{n}",
            tag=tag,
            episode=session.episode,
            tokenizer=self.tokenizer_spec,
        )
        session.records.append(record)
        return record

    def close(self, session_id: str, answer: str | None, reward: float | None) -> list[EpisodeRecord]:
        """End the session: its answer lands on "main" (stop reason `answer`), its lines in the file.
        KeyError when no such session is open."""
        with self.lock:
            session = self.open.pop(session_id)
            main = session.records[0]
            if answer is not None:
                main.answer, main.stop_reason = answer, StopReason.ANSWER
            main.reward = reward
            if self.path is not None:
                with open(self.path, "a") as f:
                    for record in session.records:
                        f.write(json.dumps(record.to_json(), ensure_ascii=False) + "\n")
            return session.records

    def close_all(self) -> None:
        """At shutdown: every open session is written, without an answer."""
        for session_id in list(self.open):
            self.close(session_id, None, None)


def close_fields(body: Any) -> tuple[str | None, float | None]:
    """(answer, reward) of a close request's JSON body; ValueError names a bad field."""
    body = body or {}
    if not isinstance(body, dict):
        raise ValueError("the body must be a JSON object")
    answer, reward = body.get("answer"), body.get("reward")
    if answer is not None and not isinstance(answer, str):
        raise ValueError("answer must be a string")
    if reward is not None and (isinstance(reward, bool) or not isinstance(reward, (int, float))):
        raise ValueError("reward must be a number")
    return answer, None if reward is None else float(reward)
