"""The text environment of one HiMAP role (coordinator or a day executor).

Same contract as `sandbox.env.EpisodeEnv.step(text) -> StepResult`: the turn is parsed by
sandbox.parser, world tools answer in `<tool_response>` blocks rendered the same way, parse errors
are answered in place. What differs:

- the role sees a subset of the benchmark's world tools plus its protocol tools (`ProtocolTool`:
  distribute_task, check_items, submit_day, ...), which act on the episode's shared session;
- a turn can be split in two: `stage(text)` parses, validates and runs the world tools (pure, so
  any time is fine; every agent error is known here), `apply(staged)` runs the protocol calls in
  written order (they change Σ and the rounds, so the session calls it in a fixed order);
  `finish(responses)` makes the StepResult. `step` = all three;
- memory is off (a role's context is short), and `<answer>` is not how a role ends: an executor
  ends with submit_day / reject_subgoal, the coordinator's answer is the merged plan.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from sandbox.env import EXECUTED, EpisodeEnv, Response, StepResult
from sandbox.himap.kinds import Ending
from sandbox.parser import ParsedTurn, ParseError, ToolCall, parse_turn
from sandbox.tools.args import Param, ToolArgError, function_schema, validate_arguments
from sandbox.types import ResponseKind, StopReason, ToolResult


@dataclasses.dataclass(frozen=True)
class ProtocolTool:
    """A tool that acts on the episode's session. `check(args)` finds agent errors (pure, at
    stage time); `run(env, args)` acts (at apply time) and may set `env.ending`, where `env` is the
    calling role's environment (built after its tools, so it is handed in, not captured)."""

    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[[RoleEnv, dict[str, Any]], ToolResult]
    check: Callable[[dict[str, Any]], str | None] = lambda args: None
    ends_role: bool = False  # submit_day / reject_subgoal: at most one such call per turn

    def schema(self) -> dict[str, Any]:
        return function_schema(self.name, self.description, self.params)


@dataclasses.dataclass
class _Pending:
    tool: ProtocolTool
    args: dict[str, Any]


@dataclasses.dataclass
class StagedTurn:
    """A parsed turn whose world tools have run and whose protocol calls wait for `apply`."""

    parsed: ParsedTurn
    slots: list[Response | _Pending]

    @property
    def errors(self) -> list[bool]:
        """Per-call error flags, known at stage time (protocol calls that passed `check` are not
        errors: a Σ rejection is a normal reply)."""
        return [s.is_error if isinstance(s, Response) else False for s in self.slots]

    @property
    def has_protocol_calls(self) -> bool:
        """Calls that act on the session (Σ, submit, reject): these turns are ordered."""
        return any(isinstance(s, _Pending) for s in self.slots)

    @property
    def names(self) -> list[str]:
        return [s.name if isinstance(s, Response) else s.tool.name for s in self.slots]


class _RoleWorld:
    """The benchmark world restricted to the tools a role may call."""

    def __init__(self, world: Any, allowed: Sequence[str]):
        self.world, self.allowed = world, tuple(allowed)

    def call_tool(self, name: str, arguments: dict) -> ToolResult:
        if name not in self.allowed:
            return ToolResult.error(f"tool {name!r} is not available to this role")
        return self.world.call_tool(name, arguments)

    def tool_schemas(self) -> list[dict[str, Any]]:
        return [s for s in self.world.tool_schemas() if s["function"]["name"] in self.allowed]


class RoleEnv(EpisodeEnv):
    """One role's environment; see the module docstring."""

    def __init__(
        self,
        world: Any,
        world_tools: Sequence[str],
        protocol_tools: Sequence[ProtocolTool],
        *,
        max_turns: int,
        max_response_chars: int = 6000,
    ):
        super().__init__(
            _RoleWorld(world, world_tools),
            memory_enabled=False,
            max_turns=max_turns,
            max_response_chars=max_response_chars,
        )
        self.protocol = {t.name: t for t in protocol_tools}
        self.ending: Ending | None = None  # set by an ending tool's run
        self.last_step: StepResult | None = None

    def tool_schemas(self) -> list[dict[str, Any]]:
        return self.world.tool_schemas() + [t.schema() for t in self.protocol.values()]

    # -- the split turn ---------------------------------------------------------------------------
    def stage(self, text: str) -> StagedTurn:
        if self.done:
            raise RuntimeError("this role has ended; its environment takes no more turns")
        self.turns += 1
        parsed = parse_turn(text)
        if parsed.answer is not None:
            msg = "a role does not answer with <answer>; " + (
                "end with submit_day or reject_subgoal"
                if any(t.ends_role for t in self.protocol.values())
                else "the plan is merged from the accepted days"
            )
            return StagedTurn(parsed, [self._respond(ResponseKind.TOOL, "answer", ToolResult.error(msg))])
        if not parsed.actions:
            return StagedTurn(
                parsed, [self._respond(ResponseKind.TOOL, "parse", ToolResult.error(_NO_ACTION))]
            )
        world_calls = [a for a in parsed.actions if isinstance(a, ToolCall) and a.name not in self.protocol]
        results = iter(self._run_tools(world_calls))
        slots: list[Response | _Pending] = []
        ending = 0
        for action in parsed.actions:
            if isinstance(action, ParseError):
                slots.append(self._respond(action.kind, "parse", ToolResult.error(action.message)))
            elif not isinstance(action, ToolCall):
                slots.append(self._respond(ResponseKind.MEMORY, "memory", self._memory(action)))
            elif action.name not in self.protocol:
                slots.append(self._respond(ResponseKind.TOOL, action.name, next(results)))
            else:
                tool = self.protocol[action.name]
                ending += tool.ends_role
                slots.append(self._stage_protocol(tool, action.arguments, ending > 1))
        return StagedTurn(parsed, slots)

    def _stage_protocol(self, tool: ProtocolTool, arguments: Any, second_ending: bool) -> Response | _Pending:
        if second_ending:
            return self._respond(
                ResponseKind.TOOL, tool.name, ToolResult.error("only one ending call per turn")
            )
        try:
            args = validate_arguments(tool.name, tool.params, arguments)
        except ToolArgError as err:
            return self._respond(ResponseKind.TOOL, tool.name, ToolResult.error(str(err)))
        problem = tool.check(args)
        if problem:
            return self._respond(ResponseKind.TOOL, tool.name, ToolResult.error(problem))
        return _Pending(tool, args)

    def apply(self, staged: StagedTurn) -> list[Response]:
        """Run the protocol calls in written order; the turn's responses, in call order."""
        out = []
        for slot in staged.slots:
            if isinstance(slot, _Pending):
                if self.ending is not None:  # an ending call earlier in this turn ended the role
                    result = ToolResult.error("the role ended earlier in this turn; call not run")
                else:
                    result = slot.tool.run(self, slot.args)
                out.append(self._respond(ResponseKind.TOOL, slot.tool.name, result))
            else:
                out.append(slot)
        return out

    def finish(self, staged: StagedTurn, responses: list[Response]) -> StepResult:
        """The StepResult of a turn from its (applied) responses."""
        if self.ending is not None:  # submit_day / reject_subgoal ended the role
            self.done, self.stop_reason = True, StopReason.DONE
        elif self.turns >= self.max_turns:
            self.done, self.stop_reason = True, StopReason.MAX_TURNS
        responses = self._cap_turn(responses)
        EXECUTED.add(answered=len(responses))
        self.any_error = self.any_error or any(r.is_error for r in responses)
        self.last_step = StepResult(
            responses=responses,
            rendered="\n".join(r.render() for r in responses),
            done=self.done,
            answer=None,
            any_error=self.any_error,
            stop_reason=self.stop_reason,
            parsed=staged.parsed,
        )
        return self.last_step

    def step(self, assistant_text: str) -> StepResult:
        staged = self.stage(assistant_text)
        return self.finish(staged, self.apply(staged))


_NO_ACTION = (
    'no action in this turn. Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>.'
)
