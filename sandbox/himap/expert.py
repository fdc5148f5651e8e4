"""The scripted HiMAP expert: non-LLM policies driven through the real protocol, as text.

Every role (coordinator, each day executor) is a policy running in its own thread that writes
turns through a `RoleSession` (the single-agent expert's session: same turn format, same trace
format), whose environment is a channel to the driver. The driver hands each text to
`HimapSession.turn` in the order the streams were created (the engine's order), delivers the
replies and ends, and stops when the session has its answer. Because the session orders the
executors' protocol calls by its logical clock, the outcome does not depend on thread timing.

Results: the answer, role-split SFT traces ({"messages", "tools", "role", "day", "round",
"stream"}), each stream's assistant texts (replayed as forced tokens by rollout.agents.himap) and the
session's figures. Each benchmark's policies live in its own folder (Benchmark.himap_expert).
"""

from __future__ import annotations

import dataclasses
import json
import queue
import random
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from sandbox.env import StepResult
from sandbox.expert_session import ExpertFailure, ExpertSession, turn_text
from sandbox.himap.figures import SessionFigures
from sandbox.himap.kinds import StreamStart
from sandbox.himap.prompts import EXECUTOR_LOOKUPS, SUBGOAL_PREFIX
from sandbox.himap.protocol import Advance, HimapSession

POLICY_TIMEOUT_S = 120.0
_DONE = object()


class RoleEnded(Exception):
    """The role's stream was ended by the protocol; the policy stops."""


class _Channel:
    """Looks like an EpisodeEnv to ExpertSession; each step is a round trip through the driver."""

    def __init__(self) -> None:
        self.outbox: queue.Queue[Any] = queue.Queue()
        self.inbox: queue.Queue[Any] = queue.Queue()
        self.done = False
        self.any_error = False

    def step(self, text: str) -> StepResult:
        if self.done:
            raise RoleEnded()
        self.outbox.put(text)
        step = self.inbox.get()
        if step is None:
            self.done = True
            raise RoleEnded()
        self.done = step.done
        return step


class RoleSession(ExpertSession):
    """The single-agent expert's session on a role channel: memory is off in HiMAP roles, so memory
    operations are dropped and a turn left with nothing to do is skipped. The assistant text is
    recorded before it is sent, so a role's last turn is in its trace even if no reply comes."""

    def act(self, think: str, memory: Sequence[dict] = (), calls: Sequence[dict] = ()) -> list[str]:
        if not calls:
            return []
        step = self.raw(turn_text(think, (), calls))
        errors = [r.text for r in step.responses if r.is_error]
        if errors:
            raise ExpertFailure(f"environment reported an error: {errors[0][:200]}")
        return [r.text for r in step.responses if r.kind == "tool"]

    def raw(self, text: str) -> StepResult:
        """One turn of exactly `text` (the caller reads the replies itself)."""
        self.turns.append({"role": "assistant", "content": text})
        step = self.env.step(text)
        self.turns.append({"role": "user", "content": step.rendered})
        return step


Policy = Callable[[RoleSession, StreamStart], None]
Policies = Callable[[StreamStart], Policy]  # a team: the policy of each stream's role


@dataclasses.dataclass
class _Role:
    start: StreamStart
    session: RoleSession
    thread: threading.Thread | None = None
    texts: list[str] = dataclasses.field(default_factory=list)
    failure: str | None = None


@dataclasses.dataclass
class HimapExpertResult:
    answer: str | None
    traces: list[dict[str, Any]]
    texts: dict[str, list[str]]  # stream -> its assistant turns, in order
    figures: SessionFigures
    session: HimapSession
    failures: dict[str, str]  # stream -> why its policy stopped early


def drive(session: HimapSession, policy_for: Policies) -> HimapExpertResult:
    """Run one episode with scripted policies (`policy_for(start)` picks the role's policy)."""
    roles: dict[str, _Role] = {}
    speaking: list[str] = []

    def launch(start: StreamStart) -> None:
        role = _Role(start, RoleSession(_Channel()))  # type: ignore[arg-type]
        role.thread = threading.Thread(target=_run_policy, args=(role, policy_for(start)), daemon=True)
        roles[start.name] = role
        role.thread.start()
        speaking.append(start.name)

    def handle(adv: Advance) -> None:
        for start in adv.start:
            launch(start)
        for name, step in adv.reply:
            roles[name].session.env.inbox.put(step)
            speaking.append(name)
        for name, step in adv.end:
            roles[name].session.env.inbox.put(step)  # the policy sees its last reply, then stops

    handle(session.start())
    while not session.finished and speaking:
        name = speaking.pop(0)
        role = roles[name]
        try:
            text = role.session.env.outbox.get(timeout=POLICY_TIMEOUT_S)
        except queue.Empty:
            text = _DONE
            role.failure = role.failure or "policy timed out"
        if text is _DONE:
            handle(session.cut(name, role.failure or "policy stopped"))
        else:
            role.texts.append(text)
            handle(session.turn(name, text))
    for role in roles.values():  # release policies still waiting on a reply
        role.session.env.inbox.put(None)
        role.thread.join(timeout=5)
    return HimapExpertResult(
        session.answer,
        [_trace(role) for role in roles.values() if role.texts],
        {n: r.texts for n, r in roles.items()},
        session.figures(),
        session,
        {n: r.failure for n, r in roles.items() if r.failure},
    )


def _run_policy(role: _Role, policy: Policy) -> None:
    try:
        policy(role.session, role.start)
    except RoleEnded:
        pass
    except ExpertFailure as err:
        role.failure = str(err)
    except Exception as err:  # noqa: BLE001 - a policy bug ends that role, reported, not the run
        role.failure = f"{type(err).__name__}: {err}"
    finally:
        if not role.session.env.done:
            role.session.env.outbox.put(_DONE)


def _trace(role: _Role) -> dict[str, Any]:
    """The role's SFT example: its prompt, then its turns (the reply to its last turn dropped)."""
    turns = list(role.session.turns)
    if turns and turns[-1]["role"] == "user":
        turns.pop()
    start = role.start
    return {
        "messages": [*start.prompt.messages, *turns],
        "tools": start.prompt.tools,
        "role": start.role,
        "day": start.day,
        "round": start.round,
        "stream": start.name,
    }


def replay(
    session: HimapSession,
    texts: dict[str, list[str]],
    *,
    reverse: bool = False,
    rng: random.Random | None = None,
) -> HimapSession:
    """Feed recorded assistant turns (`HimapExpertResult.texts`) to a fresh session; `reverse`
    hands each batch of waiting streams over in reverse creation order, `rng` in a random order
    and a random part of it at a time (the rest waits: some streams run ahead of others). The
    outcome must not change (the logical clock orders protocol calls). Returns the session."""
    used = dict.fromkeys(texts, 0)
    waiting: list[str] = []

    def handle(adv: Advance) -> None:
        waiting.extend(s.name for s in adv.start)
        waiting.extend(name for name, _ in adv.reply)

    handle(session.start())
    while waiting and not session.finished:
        batch = list(reversed(waiting)) if reverse else list(waiting)
        if rng is not None:
            rng.shuffle(batch)
            batch = batch[: rng.randint(1, len(batch))]
        for name in batch:
            waiting.remove(name)
        for name in batch:
            if session.finished:
                break
            recorded, k = texts.get(name, []), used.get(name, 0)
            if k >= len(recorded):
                handle(session.cut(name, "no more recorded turns"))
                continue
            used[name] = k + 1
            handle(session.turn(name, recorded[k]))
    return session


def subgoal_of(start: StreamStart) -> dict[str, Any]:
    """The sub-goal an executor's prompt states (what a model reads too): every benchmark's
    scripted executor plans its day from this, not from the coordinator's private state."""
    for line in start.prompt.messages[-1]["content"].splitlines():
        if line.startswith(SUBGOAL_PREFIX):
            return json.loads(line[len(SUBGOAL_PREFIX) :])
    raise ExpertFailure("the executor prompt has no sub-goal")


_LOOKUP = re.compile(r"<tool_call>(.*?)</tool_call>\n<tool_response>\n(.*?)\n</tool_response>", re.S)


def _shown_searches(start: StreamStart) -> list[tuple[dict[str, Any], str]]:
    """The coordinator's shared searches an executor's prompt shows (HimapDomain.shared_lookups):
    (the parsed call, response text) in call order; empty when the prompt has none."""
    text = start.prompt.messages[-1]["content"]
    if EXECUTOR_LOOKUPS not in text:
        return []
    return [(json.loads(call), reply) for call, reply in _LOOKUP.findall(text)]


def lookups_of(start: StreamStart) -> list[tuple[str, str]]:
    """The shown searches as (tool name, response text), in call order."""
    return [(call["name"], reply) for call, reply in _shown_searches(start)]


def lookup_key(call: dict[str, Any]) -> tuple[str, str]:
    """A search's identity: (tool name, its arguments as sorted JSON)."""
    return call["name"], json.dumps(call["arguments"], sort_keys=True)


def lookup_replies(start: StreamStart) -> dict[tuple[str, str], str]:
    """The shown searches' response texts by `lookup_key`."""
    return {lookup_key(call): reply for call, reply in _shown_searches(start)}
