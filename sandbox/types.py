"""Small value types shared by the tools, the Python sandbox and the episode environment."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returns to the agent: text for the context, and whether it failed.

    Tools never raise into the caller; a failure is a result with `is_error=True` and a message
    that tells the agent what to fix. A failure of the environment itself (a corrupt or unreadable
    store) is `env_fault=True` with `is_error=False`: the agent did nothing wrong and must not be
    penalised, and the run can count or drop such episodes.
    """

    text: str
    is_error: bool = False
    env_fault: bool = False

    @classmethod
    def error(cls, message: str) -> "ToolResult":
        return cls(text=f"Error: {message}", is_error=True)

    @classmethod
    def environment_fault(cls, message: str) -> "ToolResult":
        return cls(
            text=f"Error: {message}; this is a fault of the environment, not of the call", env_fault=True
        )
