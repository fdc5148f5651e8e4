"""The agent's internal memory: a per-episode key-value store (SPEC.md section 3).

The agent writes `<memory>{"action": "write", "key": "hotel", "value": ...}</memory>` and reads
with `{"action": "read", "key": "hotel"}` or key `"all"`. Values are any JSON value. Every
malformed operation is an error result (it counts for the action penalty), never an exception.
Replies are deterministic JSON so that identical episodes produce identical token streams.
"""

import json
from typing import Any

from sandbox.types import ToolResult

ALL_KEY = "all"
_FIELDS = {"action", "key", "value"}


def _render(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))


class Memory:
    """Key-value store with bounds on key length, value size and total size (in JSON characters)."""

    def __init__(
        self,
        max_key_chars: int = 64,
        max_value_chars: int = 4000,
        max_total_chars: int = 16000,
        max_keys: int = 64,
    ) -> None:
        self.max_key_chars = max_key_chars
        self.max_value_chars = max_value_chars
        self.max_total_chars = max_total_chars
        self.max_keys = max_keys
        self._data: dict[str, Any] = {}
        self._sizes: dict[str, int] = {}

    def snapshot(self) -> dict[str, Any]:
        """A copy of the stored entries (for logging and tests)."""
        return json.loads(json.dumps(self._data))

    def total_chars(self) -> int:
        return sum(self._sizes.values())

    def apply(self, op: Any) -> ToolResult:
        """Run one operation parsed from a `<memory>` block."""
        if not isinstance(op, dict):
            return ToolResult.error(
                'a memory operation must be a JSON object like {"action": "read", "key": "..."}'
            )
        unknown = sorted(set(op) - _FIELDS)
        if unknown:
            return ToolResult.error(
                f"unknown field(s) {unknown} in memory operation; allowed: action, key, value"
            )
        action = op.get("action")
        if action not in ("read", "write"):
            return ToolResult.error(f'memory "action" must be "read" or "write", got {action!r}')
        key = op.get("key")
        if "key" not in op:
            return ToolResult.error('memory operation needs a "key"')
        if not isinstance(key, str):
            return ToolResult.error(f'memory "key" must be a string, got {type(key).__name__}')
        if not key.strip():
            return ToolResult.error('memory "key" must not be empty')
        if len(key) > self.max_key_chars:
            return ToolResult.error(f"memory key is {len(key)} characters; the limit is {self.max_key_chars}")
        return self._read(key) if action == "read" else self._write(key, op)

    def _read(self, key: str) -> ToolResult:
        if key == ALL_KEY:
            return ToolResult(_render(self._data))
        if key not in self._data:
            stored = sorted(self._data)
            return ToolResult.error(f"no memory entry {key!r}; stored keys: {_render(stored)}")
        return ToolResult(_render({key: self._data[key]}))

    def _write(self, key: str, op: dict) -> ToolResult:
        if key == ALL_KEY:
            return ToolResult.error(f'"{ALL_KEY}" is reserved for reading every entry; choose another key')
        if "value" not in op or op["value"] is None:
            return ToolResult.error('memory "write" needs a non-null "value"')
        value = op["value"]
        size = len(_render(value))
        if size > self.max_value_chars:
            return ToolResult.error(
                f"memory value is {size} characters; the limit per value is {self.max_value_chars}"
            )
        if key not in self._data and len(self._data) >= self.max_keys:
            return ToolResult.error(f"memory is full ({self.max_keys} keys); overwrite an existing key")
        new_total = self.total_chars() - self._sizes.get(key, 0) + size
        if new_total > self.max_total_chars:
            return ToolResult.error(
                f"memory would hold {new_total} characters; the limit is "
                f"{self.max_total_chars}; overwrite or shorten entries"
            )
        self._data[key] = value
        self._sizes[key] = size
        return ToolResult(f"Stored {key!r} ({size} characters). Keys: {_render(list(self._data))}")
