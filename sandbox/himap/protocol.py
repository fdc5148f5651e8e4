"""One HiMAP episode as a state machine over text turns: coordinator, rounds, day executors, Σ.

Drivers (the scripted expert, rollout.agents.himap) own the text; the session owns everything else.
`start()` and every `turn(stream, text)` / `cut(stream, reason)` return an `Advance`: streams to
start (with their prompts), streams to continue (with the environment's reply), streams whose
role ended, and, once, the episode's answer. Streams: "coordinator" and one "day{d}.r{r}" per
(day, round).

Rounds are synchronous. The coordinator's distribute_task starts round r; its reply (the round
report) comes when every executor of the round has ended; it then re-distributes only the
rejected days (accepted days keep their commits; a rejected day's commits are released). The
answer is `domain.merge` of the accepted days after all are accepted or the last round; when the
last round leaves days open the coordinator may first hand them in itself (sandbox/himap/fallback.py).

Determinism without lockstep: an executor's turn is staged when it ends (parse, argument checks
and world tools: pure). A turn without protocol calls (searches only) is answered at once. Only
turns with protocol calls (Σ check/commit, submit, reject) are ordered, by a logical clock: day
d's k-th such turn is applied after every lower day's k-th and every higher day's (k-1)-th (or
that day's end), i.e. in (k, day) order. Σ sees the same sequence of calls whatever the batching,
so the episode depends only on the texts, never on which stream the engine finished first.
Serial mode runs one executor at a time (the next starts when one ends).
"""

from __future__ import annotations

import collections
import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from sandbox.env import StepResult
from sandbox.himap.domain import HimapDomain, SubGoal, dumps
from sandbox.himap.fallback import goal_for_slot, submit_plan_tool
from sandbox.himap.figures import PhaseTimes, SessionFigures
from sandbox.himap.kinds import COORDINATOR, DayOutcome, DayStatus, Role, StreamStart, executor_stream
from sandbox.himap.options import HimapOptions
from sandbox.himap.prompts import coordinator_prompt, executor_prompt
from sandbox.himap.roles import RoleEnv, StagedTurn
from sandbox.himap.state import GlobalState
from sandbox.himap.tools import ROUND_PENDING, coordinator_tools, executor_tools, round_report
from sandbox.types import Prompt


@dataclasses.dataclass
class Advance:
    """What the driver does next. `errors`/`calls`: the flags and names of the turn just handed in
    (known at once, even when the turn's effects wait for the tick)."""

    start: list[StreamStart] = dataclasses.field(default_factory=list)
    reply: list[tuple[str, StepResult]] = dataclasses.field(default_factory=list)
    end: list[tuple[str, StepResult | None]] = dataclasses.field(default_factory=list)
    finished: bool = False
    answer: str | None = None
    errors: list[bool] = dataclasses.field(default_factory=list)
    calls: list[str] = dataclasses.field(default_factory=list)

    def merge(self, other: Advance) -> Advance:
        self.start += other.start
        self.reply += other.reply
        self.end += other.end
        if other.finished:
            self.finished, self.answer = True, other.answer
        return self


@dataclasses.dataclass
class _Executor:
    goal: SubGoal
    round: int
    env: RoleEnv
    prompt: Prompt


class HimapSession:
    """One episode of one instance; see the module docstring."""

    def __init__(
        self,
        domain: HimapDomain,
        options: HimapOptions | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.domain, self.options, self.clock = domain, options or HimapOptions(), clock
        self.sigma: GlobalState | None = None
        if self.options.global_state:
            self.sigma = GlobalState(domain.pricing(), domain.budget, domain.visited())
        self.round = 0
        self.mode: str | None = None
        self.goals: dict[int, SubGoal] = {}  # the latest sub-goal of every day
        self.accepted: dict[int, DayOutcome] = {}
        self.outcomes: list[DayOutcome] = []  # every executor's end, in order
        self.executors: dict[str, _Executor] = {}
        self.coordinator: RoleEnv | None = None
        self.finished = False
        self.answer: str | None = None
        self.fallback_open = False  # the last round left days open: submit_plan is allowed
        self.fallback_days: list[int] = []  # open days the coordinator's submit_plan filled
        self.marks: dict[str, float] = {}  # start, round1, round1_end, finish (phase timing)
        self._live: list[str] = []  # executors of the running round, day order
        self._queue: list[str] = []  # serial mode: executors not started yet
        self._staged: dict[str, StagedTurn] = {}  # ordered turns waiting for the logical clock
        self._clock: dict[str, int] = {}  # executor -> its ordered turns applied so far
        self._held: tuple[StagedTurn, list[Any]] | None = None  # coordinator turn awaiting its report
        self._started: list[StreamStart] = []
        self._round_outcomes: list[DayOutcome] = []
        self.lookups: list[str] = []  # the coordinator's shared searches, rendered (see _share)

    # -- queries ---------------------------------------------------------------------------------
    def open_days(self) -> list[int]:
        return [s.day for s in self.domain.slots() if s.day not in self.accepted]

    def goal_of(self, day: int) -> SubGoal | None:
        return goal_for_slot(self, day)

    def accepted_cost(self) -> float:
        return math.fsum(o.cost or 0.0 for o in self.accepted.values())

    @property
    def round_running(self) -> bool:
        return bool(self._live or self._queue)

    # -- driver API ------------------------------------------------------------------------------
    def start(self) -> Advance:
        self.marks["start"] = self.clock()
        if not self.options.coordinator:
            self.start_round(self.domain.flat_split(), None)
            return Advance(start=self._take_started())
        world_tools, protocol_tools = self.domain.coordinator_tools(), coordinator_tools(self)
        if self.options.fallback_allowed:  # planning days itself needs the executors' searches
            world_tools += tuple(t for t in self.domain.executor_tools() if t not in world_tools)
            protocol_tools.append(submit_plan_tool(self))
        env = RoleEnv(
            self.domain.world(),
            world_tools,
            protocol_tools,
            max_turns=self.options.coordinator_limits.max_turns,
            max_response_chars=self.options.max_response_chars,
        )
        self.coordinator = env
        prompt = coordinator_prompt(self.domain.request(), env.tool_schemas(), self.domain.shared_lookups)
        return Advance(start=[StreamStart(COORDINATOR, Role.COORDINATOR, None, None, prompt)])

    def turn(self, stream: str, text: str) -> Advance:
        """`stream` ended a turn with `text` (its decoded assistant text)."""
        if self.finished:
            raise RuntimeError("the HiMAP episode is over")
        if stream == COORDINATOR:
            return self._coordinator_turn(text)
        if stream not in self._live or stream in self._staged:
            raise RuntimeError(f"stream {stream!r} is not waiting for a turn")
        staged = self.executors[stream].env.stage(text)
        out = Advance(errors=staged.errors, calls=staged.names)
        if self.options.sigma_while_planning and staged.has_protocol_calls:
            self._staged[stream] = staged
        else:  # searches only (or nothing shared to order): the reply needs no other day
            self._apply(stream, staged, out)
        return out.merge(self._drain())

    def cut(self, stream: str, reason: str) -> Advance:
        """The driver stopped `stream` at a limit (tokens, turns): its role ends here."""
        if self.finished:
            return Advance()
        if stream == COORDINATOR:
            if self.coordinator is not None:
                self.coordinator.done = True
            return Advance() if self.round_running else self._finish()
        if stream not in self._live:
            return Advance()
        self._live.remove(stream)
        self._staged.pop(stream, None)
        ex = self.executors[stream]
        self._round_outcomes.append(
            DayOutcome(ex.goal.day, ex.round, stream, DayStatus.REJECTED, "cut", f"stopped: {reason}")
        )
        return Advance(start=self._next_serial()).merge(self._drain())

    # -- coordinator -----------------------------------------------------------------------------
    def _coordinator_turn(self, text: str) -> Advance:
        env = self.coordinator
        if env is None or self.round_running or env.done:
            raise RuntimeError("the coordinator is not waiting for a turn")
        staged = env.stage(text)
        responses = env.apply(staged)
        self._share(staged, responses)
        errors = [r.is_error for r in responses]
        calls = [r.name for r in responses]
        started = self._take_started()
        if started:
            self._held = (staged, responses)
            return Advance(start=started, errors=errors, calls=calls)
        step = env.finish(staged, responses)
        if step.done:
            out = self._finish()
            out.end.insert(0, (COORDINATOR, step))
            return dataclasses.replace(out, errors=errors, calls=calls)
        return Advance(reply=[(COORDINATOR, step)], errors=errors, calls=calls)

    def _share(self, staged: StagedTurn, responses: list[Any]) -> None:
        """Keep the coordinator's successful searches of the domain's shared tools: every executor
        sees them once, in the shared part of its prompt, instead of repeating them per day."""
        for action, response in zip(staged.parsed.actions, responses):
            name = getattr(action, "name", None)
            if name in self.domain.shared_lookups and not response.is_error:
                call = dumps({"name": name, "arguments": action.arguments})
                self.lookups.append(f"<tool_call>{call}</tool_call>\n{response.render()}")

    def start_round(self, goals: list[SubGoal], mode: str | None) -> None:
        """Begin the next round with these sub-goals (called by distribute_task or the flat split)."""
        self.round += 1
        self.mode = mode if mode is not None else self.mode
        if self.round == 1:
            self.marks["round1"] = self.clock()
        dates = {s.day: s.date for s in self.domain.slots()}
        names = []
        for goal in sorted(goals, key=lambda g: g.day):
            goal = dataclasses.replace(goal, transport_mode=self.mode, date=dates.get(goal.day))
            details = self.domain.subgoal_details(goal)  # checked when distribute_task was staged
            if isinstance(details, dict) and details:
                goal = dataclasses.replace(goal, extra={**goal.extra, **details})
            self.goals[goal.day] = goal
            names.append(self._make_executor(goal))
        self._round_outcomes = []
        if self.options.parallel:
            self._live = names
            self._started += [self._start_of(n) for n in names]
        else:
            self._queue = names
            self._started += self._next_serial()

    def _make_executor(self, goal: SubGoal) -> str:
        name = executor_stream(goal.day, self.round)
        env = RoleEnv(
            self.domain.world(),
            self.domain.executor_tools(),
            executor_tools(self, goal),
            max_turns=self.options.executor_limits.max_turns,
            max_response_chars=self.options.max_response_chars,
        )
        prompt = executor_prompt(
            goal,
            self.domain.task(),
            self.domain.executor_brief(goal),
            env.tool_schemas(),
            sigma=self.options.sigma_while_planning,
            can_reject=self.options.bargaining and self.options.coordinator,
            instruction=None if self.options.coordinator else self.domain.instruction(),
            lookups=self.lookups,
        )
        self.executors[name] = _Executor(goal, self.round, env, prompt)
        return name

    def _start_of(self, name: str) -> StreamStart:
        ex = self.executors[name]
        return StreamStart(name, Role.EXECUTOR, ex.goal.day, ex.round, ex.prompt)

    def _next_serial(self) -> list[StreamStart]:
        if self._live or not self._queue:
            return []
        name = self._queue.pop(0)
        self._live = [name]
        return [self._start_of(name)]

    def _take_started(self) -> list[StreamStart]:
        started, self._started = self._started, []
        return started

    # -- executors -------------------------------------------------------------------------------
    def _apply(self, name: str, staged: StagedTurn, out: Advance) -> None:
        """Run the turn's protocol calls and hand the executor its reply (or its end)."""
        ex = self.executors[name]
        step = ex.env.finish(staged, ex.env.apply(staged))
        if not step.done:
            out.reply.append((name, step))
            return
        self._live.remove(name)
        out.end.append((name, step))
        self._round_outcomes.append(DayOutcome.of_ending(ex.goal.day, ex.round, name, ex.env.ending))
        out.start += self._next_serial()

    def _due(self, name: str) -> bool:
        """The logical clock: `name`'s waiting turn k goes after every lower live day's k-th ordered
        turn and every higher live day's (k-1)-th (ended days wait for nothing)."""
        k, day = self._clock.get(name, 0) + 1, self.executors[name].goal.day
        for other in self._live:
            if other != name:
                need = k if self.executors[other].goal.day < day else k - 1
                if self._clock.get(other, 0) < need:
                    return False
        return True

    def _drain(self) -> Advance:
        """Apply every waiting ordered turn that is due, in (k, day) order; end the round when
        no executor is left."""
        out = Advance()
        while True:
            due = [n for n in self._staged if self._due(n)]
            if not due:
                break
            name = min(due, key=lambda n: (self._clock.get(n, 0), self.executors[n].goal.day))
            self._clock[name] = self._clock.get(name, 0) + 1
            self._apply(name, self._staged.pop(name), out)
        if not self.round_running:
            out.merge(self._end_round())
        return out

    # -- rounds ----------------------------------------------------------------------------------
    def _end_round(self) -> Advance:
        outcomes = sorted(self._round_outcomes, key=lambda o: o.day)
        if self.sigma is not None and not self.options.early_detection:
            outcomes = [self._commit_at_merge(o) for o in outcomes]
        for o in outcomes:
            if o.status != DayStatus.REJECTED:
                o.status = DayStatus.ACCEPTED
                self.accepted[o.day] = o
            elif self.sigma is not None:
                self.sigma.release(o.day)
        self.outcomes += outcomes
        if self.round == 1:
            self.marks["round1_end"] = self.clock()
        coordinator = self.coordinator
        if not self.open_days() or coordinator is None or coordinator.done:
            return self._finish()
        if self.round >= self.options.rounds:
            if not self.options.fallback_allowed:
                return self._finish()
            self.fallback_open = True  # the report goes out; submit_plan may fill the open days
        assert self._held is not None
        staged, responses = self._held
        self._held = None
        report = dumps(round_report(self, outcomes))
        responses = [dataclasses.replace(r, text=report) if r.text == ROUND_PENDING else r for r in responses]
        step = coordinator.finish(staged, responses)
        if step.done:
            return self._finish()
        return Advance(reply=[(COORDINATOR, step)])

    def _commit_at_merge(self, o: DayOutcome) -> DayOutcome:
        """Without early detection Σ sees a day only now; a conflict rejects the day."""
        if o.status == DayStatus.REJECTED:
            return o
        assert self.sigma is not None and o.plan is not None
        verdict = self.sigma.commit(o.day, self.domain.day_items(self.goals[o.day], o.plan))
        if verdict.ok:
            return dataclasses.replace(o, cost=verdict.cost)
        return dataclasses.replace(
            o, status=DayStatus.REJECTED, code=verdict.code.value, reason=verdict.message
        )

    def _finish(self) -> Advance:
        self.finished = True
        self.marks["finish"] = self.clock()
        plans = {d: o.plan for d, o in self.accepted.items() if o.plan is not None}
        self.answer = self.domain.merge(plans) if (plans or self.round) else None
        return Advance(finished=True, answer=self.answer)

    # -- figures ---------------------------------------------------------------------------------
    def figures(self) -> SessionFigures:
        """Rounds, rejections by reason code, Σ rejections by code, turns per role, phase times."""
        rejected = collections.Counter(o.code for o in self.outcomes if o.status == DayStatus.REJECTED)
        sigma = collections.Counter(
            e.code.value
            for e in (self.sigma.events if self.sigma else [])
            if e.op != "release" and e.code.value != "ok"
        )
        m = self.marks
        finish = m.get("finish", self.clock())
        phases = PhaseTimes(
            coordinator=m.get("round1", finish) - m.get("start", finish),
            executors=m.get("round1_end", finish) - m.get("round1", finish),
            bargaining=finish - m.get("round1_end", finish),
        )
        return SessionFigures(
            rounds=self.round,
            accepted_days=len(self.accepted),
            fallback_days=len(self.fallback_days),
            days=self.domain.num_days,
            rejections=dict(sorted(rejected.items())),
            sigma_rejections=dict(sorted(sigma.items())),
            coordinator_turns=self.coordinator.turns if self.coordinator else 0,
            executor_turns=sum(ex.env.turns for ex in self.executors.values()),
            executors=len(self.executors),
            phase_s=phases,
            spent=self.sigma.spent if self.sigma else None,
        )
