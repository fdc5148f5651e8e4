"""The episode environment: one agent episode's turns, tool calls, memory and stopping.

`EpisodeEnv.step(assistant_text)` parses the turn (sandbox.parser), runs its tool calls — several
in one turn run in parallel on a thread pool — and its memory operations, and answers each, in
the order they appear, with a `<tool_response>` block (a memory reply's `<memory_response>` inside
one). Parse errors are answered in place with error blocks. The episode ends when an `<answer>` is
given or after `max_turns` turns. Nothing the agent writes makes `step` raise. One turn's responses
together are capped (`max_turn_chars`); beyond the cap they are replaced by one error block saying
what was cut.
Python calls are bounded per turn and per episode (`sandbox.python_budget`) and wait for the shared
pool as this episode (`owner=`), so one episode's loops cannot starve the others.

`step` returns the parsed turn's `.actions` (every tool call, memory op and parse error in written
order; `StepResult.parsed`). Text outside the tags is an error (it costs the action penalty), and an
`<answer>` must stand alone in its turn. Without a `python_tool`, Python calls get a "not available"
error. `truncate_middle` is the one place a long reply is cut. JSON nested more than 32 levels, in a
turn or in tool arguments, is an error result, never a RecursionError.
"""

import concurrent.futures as cf
import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Protocol

from sandbox.memory import Memory
from sandbox.parser import ParsedTurn, ParseError, ToolCall, parse_turn
from sandbox.python_budget import PythonBudget
from sandbox.strict_json import scrub_surrogates, scrub_terminal
from sandbox.tools.args import Param, function_schema
from sandbox.types import ResponseKind, StopReason, ToolResult, World

PYTHON_TOOL_NAME = "Python"
_PYTHON_PARAMS = (Param("code", "string", "Python code to run; print() what you want to see", required=True),)


def python_tool_schema() -> dict:
    """The Python tool's function schema: a prompt lists it exactly when its episodes get a runner
    (`EpisodeEnv(python_tool=...)`), the one place a Python call runs."""
    return function_schema(
        PYTHON_TOOL_NAME, "Run Python code and return its output or the error.", _PYTHON_PARAMS
    )


_NO_ACTION_MESSAGE = (
    'no action in this turn. Call a tool with <tool_call>{"name": ..., "arguments": {...}}</tool_call>, '
    'read or write memory with <memory>{"action": "read"|"write", "key": ..., "value": ...}</memory>, '
    "or give the final plan as a JSON list in <answer>...</answer>."
)

_default_pool: cf.ThreadPoolExecutor | None = None
_default_pool_lock = threading.Lock()


def _forget_pool_after_fork() -> None:
    """A forked child inherits the pool object but none of its threads: start afresh there."""
    global _default_pool, _default_pool_lock
    _default_pool, _default_pool_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def _shared_pool() -> cf.ThreadPoolExecutor:
    """One process-wide pool for parallel tool calls, so that many episodes don't make many pools."""
    global _default_pool
    with _default_pool_lock:
        if _default_pool is None:
            _default_pool = cf.ThreadPoolExecutor(max_workers=8, thread_name_prefix="sandbox-tools")
        return _default_pool


class ExecutionCounts:
    """Process-wide counts of what environments executed: `tools` (tool calls run, Python included)
    and `answered` (response blocks of finished turns: tools, memory, parse errors). Why: on several hosts an
    episode's tools must run on exactly one of them, and these counts are kept where the work
    happens, independent of the records that report it (tool calls run on pool threads: a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.tools = 0
        self.answered = 0

    def add(self, *, tools: int = 0, answered: int = 0) -> None:
        with self._lock:
            self.tools += tools
            self.answered += answered

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.tools, self.answered


EXECUTED = ExecutionCounts()


def truncate_middle(text: str, max_chars: int) -> str:
    """Keep the head and tail of `text` within `max_chars`, with a marker saying what was cut.

    The middle goes because a tool reply's head (the first results) and tail (closing
    structure) are the parts worth keeping. The result never exceeds `max_chars` characters.
    """
    if max_chars < 0:
        raise ValueError("max_chars must be >= 0")
    if len(text) <= max_chars:
        return text
    marker = f"\n...[{len(text) - max_chars} characters truncated]...\n"
    for _ in range(3):  # the marker's own length depends on how much is cut; settle it
        cut = len(text) - max(0, max_chars - len(marker))
        marker = f"\n...[{cut} characters truncated]...\n"
    keep = max_chars - len(marker)
    if keep <= 0:
        return text[:max_chars]
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


class PythonRunner(Protocol):
    """`PythonSandbox`; its optional `run_timed(code, timeout_s, owner=)` also returns the seconds used."""

    def run(self, code: str, timeout_s: float | None = None) -> ToolResult: ...


_STUB_ARGUMENT_CHARS = 200  # a folded reply's stub stays short whatever the call's arguments were


@dataclass(frozen=True)
class Response:
    kind: ResponseKind
    name: str  # tool name, "memory", or "parse" for a malformed block
    text: str
    is_error: bool
    env_fault: bool = False  # the environment failed (see ToolResult.env_fault); not an agent error
    arguments: str = ""  # a tool call's arguments as compact JSON (what a folded reply's stub names)

    @property
    def content(self) -> str:
        """The reply as an OpenAI-style `tool` message's content: a memory reply keeps the B2T
        spec's `<memory_response>` tags, a tool reply is its text."""
        if self.kind is ResponseKind.TOOL:
            return self.text
        return f"<memory_response>\n{self.text}\n</memory_response>"

    def folded(self, tokens: int) -> "Response":
        """The stub that replaces this reply when an episode's context outgrows its budget
        (rollout/context.py): the call it answered and how much was folded, so the agent can call
        again what it did not keep in memory."""
        args = scrub_surrogates(truncate_middle(self.arguments, _STUB_ARGUMENT_CHARS))
        text = f"[folded: {self.name}({args}) replied {tokens} tokens]"
        return Response(self.kind, self.name, text, self.is_error, self.env_fault, self.arguments)

    def render(self) -> str:
        """The block in the user turn: every reply, memory included, in `<tool_response>` (Qwen3's
        tool-result framing, which its chat template does not count as a new user query; see
        docs/SPEC.md section 6)."""
        return f"<tool_response>\n{self.content}\n</tool_response>"


@dataclass(frozen=True)
class StepResult:
    responses: list[Response]
    rendered: str  # the response blocks joined by "\n" ("" when there are none)
    done: bool
    answer: str | None
    any_error: bool  # cumulative over the episode
    stop_reason: str | None  # "answer" | "max_turns" | None while running
    parsed: ParsedTurn | None = None
    any_env_fault: bool = False  # cumulative: some response of the episode was an environment fault


class EpisodeEnv:
    """State of one episode: its memory, turn count and error flag."""

    def __init__(
        self,
        world: World,
        *,
        memory_enabled: bool = True,
        python_tool: PythonRunner | None = None,
        max_turns: int = 30,
        executor: cf.Executor | None = None,
        max_response_chars: int = 6000,
        max_turn_chars: int | None = None,
        memory: Memory | None = None,
        python_budget: PythonBudget | None = None,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be >= 1")
        self.world = world
        self.memory_enabled = memory_enabled
        self.memory = memory if memory is not None else Memory()
        self.python_tool = python_tool
        self.python_budget = python_budget if python_budget is not None else PythonBudget()
        self.max_turns = max_turns
        self.max_response_chars = max_response_chars
        # Default: room for 8 full responses (the expert's busiest turns use about 4).
        self.max_turn_chars = max_turn_chars if max_turn_chars is not None else 8 * max_response_chars
        self._executor = executor
        self.turns = 0
        self.any_error = False
        self.any_env_fault = False
        self.done = False
        self.answer: str | None = None
        self.stop_reason: str | None = None

    # ------------------------------------------------------------------ actions

    def _call_tool(self, call: ToolCall, python_grant: float | str | None = None) -> ToolResult:
        EXECUTED.add(tools=1)
        try:
            if call.name == PYTHON_TOOL_NAME:
                return self._call_python(call.arguments, python_grant)
            result = self.world.call_tool(call.name, call.arguments)
            if not isinstance(result, ToolResult):
                return ToolResult.error(f"tool {call.name} returned no result")
            return result
        except Exception as e:  # noqa: BLE001 - tools should not raise; if one does, the agent is told
            return ToolResult.error(f"tool {call.name} failed internally: {type(e).__name__}: {e}")

    def _call_python(self, arguments: dict, grant: float | str | None) -> ToolResult:
        if self.python_tool is None:
            return ToolResult.error("the Python tool is not available in this environment")
        extra = sorted(set(arguments) - {"code"})
        if extra:
            return ToolResult.error(f"unknown argument(s) {extra} for Python; it takes only 'code'")
        if not isinstance(arguments.get("code"), str):
            return ToolResult.error("Python needs a string argument 'code'")
        if isinstance(grant, str):
            return ToolResult.error(grant)
        run_timed = getattr(self.python_tool, "run_timed", None)
        if run_timed is not None:
            result, used = run_timed(arguments["code"], grant, owner=id(self))
        else:  # a runner without slot accounting: charge the wall time
            start = time.monotonic()
            result = self.python_tool.run(arguments["code"], grant)
            used = time.monotonic() - start
        self.python_budget.charge(min(used, grant) if grant is not None else used)
        return result

    def _memory(self, op: dict) -> ToolResult:
        if not self.memory_enabled:
            return ToolResult.error("the memory module is disabled in this environment; use tool calls only")
        return self.memory.apply(op)

    def _python_grants(self, calls: list[ToolCall]) -> list[float | str | None]:
        """Per call: the Python time limit or refusal from the budget (None: not a Python call)."""
        per_call = getattr(getattr(self.python_tool, "limits", None), "timeout_s", 2.0)
        is_python = [c.name == PYTHON_TOOL_NAME for c in calls]
        grants = iter(self.python_budget.grant(sum(is_python), per_call))
        return [next(grants) if p else None for p in is_python]

    def _run_tools(self, calls: list[ToolCall]) -> list[ToolResult]:
        grants = self._python_grants(calls)
        if len(calls) <= 1:
            return [self._call_tool(c, g) for c, g in zip(calls, grants)]
        pool = self._executor or _shared_pool()
        futures = [pool.submit(self._call_tool, c, g) for c, g in zip(calls, grants)]
        return [f.result() for f in futures]

    def _respond(self, kind: ResponseKind, name: str, result: ToolResult, arguments: str = "") -> Response:
        # A reply must stay encodable text for the tokenizer; what a program printed, an error
        # echoing the model's arguments and a memory value it wrote lose NUL and terminal escapes
        # too. A world tool's own reply is the environment's text (the HiMAP protocol's NUL-marked
        # placeholder among them, which no scrubbed text can forge).
        own = kind == ResponseKind.TOOL and name != PYTHON_TOOL_NAME and not result.is_error
        text = result.text if own else scrub_terminal(result.text)
        text = scrub_surrogates(truncate_middle(text, self.max_response_chars))
        return Response(
            kind=kind,
            name=name,
            text=text,
            is_error=bool(result.is_error),
            env_fault=bool(getattr(result, "env_fault", False)),
            arguments=arguments,
        )

    def _cap_turn(self, responses: list[Response]) -> list[Response]:
        """The turn's responses up to `max_turn_chars` rendered characters, then one error block."""
        total = 0
        for i, response in enumerate(responses):
            total += len(response.render()) + 1
            if total > self.max_turn_chars:
                cut = responses[i:]
                chars = sum(len(r.render()) + 1 for r in cut)
                return responses[:i] + [
                    Response(
                        ResponseKind.TOOL,
                        "limit",
                        (
                            f"Error: {len(cut)} more response(s) of this turn ({chars} characters) were cut: "
                            f"the responses of one turn may total at most {self.max_turn_chars} "
                            "characters; make fewer, narrower calls per turn"
                        ),
                        is_error=True,
                    )
                ]
        return responses

    # ------------------------------------------------------------------ one turn

    def step(self, assistant_text: str) -> StepResult:
        """Execute one assistant turn; see the module docstring."""
        if self.done:
            raise RuntimeError("the episode is over; start a new EpisodeEnv")
        self.turns += 1
        parsed = parse_turn(assistant_text)
        responses: list[Response] = []
        if parsed.answer is not None:
            executable = [a for a in parsed.actions if not isinstance(a, ParseError)]
            for a in parsed.actions:
                if isinstance(a, ParseError):
                    responses.append(self._respond(a.kind, "parse", ToolResult.error(a.message)))
            if executable:
                responses.append(
                    self._respond(
                        ResponseKind.TOOL,
                        "answer",
                        ToolResult.error(
                            f"<answer> must stand alone; the {len(executable)} action(s) in the same turn "
                            "were not executed"
                        ),
                    )
                )
            self.done, self.answer, self.stop_reason = True, parsed.answer, StopReason.ANSWER
        elif not parsed.actions:
            responses.append(self._respond(ResponseKind.TOOL, "parse", ToolResult.error(_NO_ACTION_MESSAGE)))
        else:
            responses = self._execute(parsed)
        if not self.done and self.turns >= self.max_turns:
            self.done, self.stop_reason = True, StopReason.MAX_TURNS
        responses = self._cap_turn(responses)
        EXECUTED.add(answered=len(responses))
        self.any_error = self.any_error or any(r.is_error for r in responses)
        self.any_env_fault = self.any_env_fault or any(r.env_fault for r in responses)
        return StepResult(
            responses=responses,
            rendered="\n".join(r.render() for r in responses),
            done=self.done,
            answer=self.answer,
            any_error=self.any_error,
            stop_reason=self.stop_reason,
            parsed=parsed,
            any_env_fault=self.any_env_fault,
        )

    def _execute(self, parsed: ParsedTurn) -> list[Response]:
        """Run the turn's actions; tool calls in parallel, memory operations in order."""
        calls = [a for a in parsed.actions if isinstance(a, ToolCall)]
        tool_results = iter(self._run_tools(calls))
        responses = []
        for action in parsed.actions:
            if isinstance(action, ToolCall):
                args = json.dumps(action.arguments, ensure_ascii=False, separators=(",", ":"))
                responses.append(self._respond(ResponseKind.TOOL, action.name, next(tool_results), args))
            elif isinstance(action, ParseError):
                responses.append(self._respond(action.kind, "parse", ToolResult.error(action.message)))
            else:
                responses.append(self._respond(ResponseKind.MEMORY, "memory", self._memory(action)))
        return responses
