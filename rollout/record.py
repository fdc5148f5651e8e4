"""EpisodeRecord: the token-in/token-out result of one agent stream, ready for training.

The record is append-only while the episode runs. Training reads `ids`, `loss_mask` and
`logprobs` directly; nothing is ever decoded and re-encoded (re-tokenisation drift would train the
model on tokens it never produced).

Besides ids, masks and log-probs a record carries `calls`, `stream`, its `tag`, `episode`,
`prompt_len`, `forced`, `error_message`, `timings`, `tokenizer` and `truncated`. Its text
+ "\n" equals Qwen3's official chat template (`models.chat.render`, or transformers'
`apply_chat_template` with the exported tokenizer) on its messages, every assistant turn's
`<think>` block included: the environment frames every reply as a tool result, which the template
does not count as a new user query (docs/SPEC.md section 6; rollout/render.py).
"""

from __future__ import annotations

import base64
import collections
import copy
import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np

from sandbox.types import TRUNCATING, StopReason

# Keys of a record's JSON that are not the agent's tag details (to_json adds `truncated`).
_NOT_DETAILS = {"role", "tag", "truncated"}


@dataclasses.dataclass(frozen=True)
class StreamTag:
    """Who a stream is in its episode, as the agent module that started it says (its Continue); the
    engine copies it onto the record and never reads it. `role` names the stream's part ("agent":
    a single agent), which per-role metrics group by; `details` are the agent's own labels, decoded
    by its module (HiMAP's day and round: rollout/agents/himap.py `HimapTag`). In a record's JSON
    they are top-level keys beside the record's own."""

    role: str = "agent"
    details: tuple[tuple[str, int], ...] = ()

    def detail(self, name: str) -> int | None:
        return dict(self.details).get(name)


@dataclasses.dataclass
class EpisodeRecord:
    """One token stream of one episode.

    ids:       every token of the stream: prompt, sampled turns, environment replies.
    loss_mask: 1 exactly on tokens the policy sampled; 0 on prompt, environment replies and any
               forced tokens (teacher-forced text or a closing <|im_end|> added after a turn cap).
    logprobs:  sampler log-probability of each sampled token, log_softmax(logits / T)[id]
               (see models.logits.token_logprobs); 0.0 where the mask is 0.
    turns:     [start, end) offsets in `ids` of each assistant turn's content (the tokens after the
               `<|im_start|>assistant\\n` header, up to and including the closing <|im_end|>).
    errors:    one flag per tool call / memory operation, in execution order.
    stream, tag, episode: which stream of which episode this is. `episode` is the episode's
               index in the `RolloutEngine.run` call, so the trainer can group the varying number
               of streams of one episode (a HiMAP coordinator and its day executors); `tag` is what
               the episode gave when it started the stream (StreamTag).
    process:   the JAX process that drove the episode (rollout.hosts.episode_owner; 0 on one host).
    responses: the environment's response blocks appended to this stream, as the environment gave
               them: {"turn": the assistant turn they answer, "kind", "name", "error", "text"}
               (records written before they were kept read back with none). The reply that
               opens a new segment is kept on the segment whose last turn it answers.
    versions:  streaming sessions only (rollout/session.py; empty otherwise): the policy version
               (weight updates applied) that computed the logits each token was sampled from,
               parallel to `ids`, -1 on tokens not sampled.
    segment:   which context of its stream this record is (rollout/context.py): 0, or k after the
               stream's context was folded k times; a record that ends with StopReason.FOLDED goes
               on in segment k + 1, whose prompt is the folded context.
    routes:    router replay only (`rollout.router_replay`; else None): the experts each MoE layer
               chose for each token the engine computed (or copied from a row that computed it),
               numpy [n, L_moe, k] (uint8 up to 256 experts), on the host: the first n tokens of
               `ids`, all but those appended after the stream's last model call (never sampled,
               followed by nothing sampled). Left out of `==`.
    """

    instance_id: str
    ids: list[int] = dataclasses.field(default_factory=list)
    loss_mask: list[int] = dataclasses.field(default_factory=list)
    logprobs: list[float] = dataclasses.field(default_factory=list)
    turns: list[tuple[int, int]] = dataclasses.field(default_factory=list)
    errors: list[bool] = dataclasses.field(default_factory=list)
    calls: list[str] = dataclasses.field(default_factory=list)  # name of each call, parallel to errors
    answer: str | None = None
    stop_reason: StopReason | None = None  # None while running
    reward: float | None = None
    stream: str = "main"
    tag: StreamTag = StreamTag()
    episode: int = 0
    process: int = 0
    prompt_len: int = 0
    forced: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # [start, end) forced spans
    error_message: str | None = None
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    tokenizer: str = ""
    responses: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    versions: list[int] = dataclasses.field(default_factory=list)
    segment: int = 0
    routes: np.ndarray | None = dataclasses.field(default=None, compare=False)

    @property
    def role(self) -> str:
        """The stream's part in its episode (`tag.role`)."""
        return self.tag.role

    @property
    def truncated(self) -> bool:
        return self.stop_reason in TRUNCATING

    @property
    def any_error(self) -> bool:
        return any(self.errors) or self.stop_reason == StopReason.ERROR

    @property
    def num_sampled(self) -> int:
        return sum(self.loss_mask)

    @property
    def version_range(self) -> tuple[int, int] | None:
        """(oldest, newest) policy version of the sampled tokens; None outside streaming sessions
        or when nothing was sampled."""
        sampled = [v for v in self.versions if v >= 0]
        return (min(sampled), max(sampled)) if sampled else None

    def append(
        self,
        ids: list[int],
        *,
        sampled: bool,
        logprobs: list[float] | None = None,
        versions: list[int] | None = None,
    ) -> None:
        """Append tokens; sampled tokens carry mask 1 and their sampler log-probs (and, in a
        streaming session, their policy versions; tokens appended unsampled since get -1)."""
        if versions is not None:
            if not sampled or len(versions) != len(ids):
                raise ValueError("versions are given for sampled tokens, one each")
            self.pad_versions()
            self.versions.extend(int(v) for v in versions)
        if sampled:
            if logprobs is None or len(logprobs) != len(ids):
                raise ValueError("sampled tokens need one log-prob each")
            self.logprobs.extend(float(x) for x in logprobs)
        else:
            self.logprobs.extend([0.0] * len(ids))
        self.ids.extend(int(t) for t in ids)
        self.loss_mask.extend([1 if sampled else 0] * len(ids))

    def put_routes(self, start: int, routes: np.ndarray) -> None:
        """The experts chosen for the tokens from `start` on (routes [n, L_moe, k]), kept beside `ids`
        (tokens computed again, after a park or a weight update, take their newest routes)."""
        end = start + len(routes)
        if self.routes is None or len(self.routes) < end:
            grown = np.zeros((end, *routes.shape[1:]), routes.dtype)
            if self.routes is not None:
                grown[: len(self.routes)] = self.routes
            self.routes = grown
        self.routes[start:end] = routes

    def pad_versions(self) -> None:
        """Streaming: -1 for the unsampled tokens appended since the last sampled ones."""
        self.versions.extend([-1] * (len(self.ids) - len(self.versions)))

    def add_responses(self, responses: Iterable[Any]) -> None:
        """Keep the environment's response blocks (sandbox.env.Response) that answer the last turn."""
        turn = len(self.turns) - 1
        for r in responses:
            block = {"kind": str(r.kind), "name": str(r.name), "error": bool(r.is_error), "text": r.text}
            self.responses.append({"turn": turn, **block})

    def to_json(self) -> dict[str, Any]:
        """The JSONL object written by launch/rollouts.py (and read by the trainer)."""
        out = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in ("tag", "routes")
        }
        out = copy.deepcopy(out)
        if self.routes is not None:  # compact: the bytes in base64, with dtype and shape
            data = base64.b64encode(np.ascontiguousarray(self.routes).tobytes()).decode("ascii")
            out["routes"] = {"dtype": self.routes.dtype.name, "shape": list(self.routes.shape), "data": data}
        out["stop_reason"] = "" if self.stop_reason is None else self.stop_reason.value
        out["turns"] = [list(t) for t in self.turns]
        out["forced"] = [list(t) for t in self.forced]
        out["role"] = self.tag.role
        out.update(self.tag.details)
        out["truncated"] = self.truncated
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> EpisodeRecord:
        """A record as `to_json` wrote it (or an older writer: keys it lacks take their defaults);
        the agent's tag details are the integer top-level keys that are not the record's own (an
        older writer's null `day` / `round` are none)."""
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs = {k: v for k, v in obj.items() if k in fields and k != "tag"}
        kwargs["turns"] = [tuple(t) for t in kwargs.get("turns", [])]
        kwargs["forced"] = [tuple(t) for t in kwargs.get("forced", [])]
        kwargs["stop_reason"] = StopReason(obj["stop_reason"]) if obj.get("stop_reason") else None
        if (routes := obj.get("routes")) is not None:
            raw = np.frombuffer(base64.b64decode(routes["data"]), routes["dtype"])
            kwargs["routes"] = raw.reshape(routes["shape"]).copy()
        own = fields | _NOT_DETAILS
        details = sorted((k, v) for k, v in obj.items() if k not in own and type(v) is int)
        kwargs["tag"] = StreamTag(str(obj.get("role", "agent")), tuple(details))
        return cls(**kwargs)


def stop_reason_counts(records: Iterable[EpisodeRecord]) -> str:
    """'max_turn_tokens 3, answer 1': how many streams stopped for each reason, most common first
    (plain values, for logs and tables)."""
    counts = collections.Counter("running" if r.stop_reason is None else str(r.stop_reason) for r in records)
    return ", ".join(f"{reason} {n}" for reason, n in counts.most_common())
