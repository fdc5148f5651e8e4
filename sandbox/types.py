"""Small value types shared by the tools, the Python sandbox and the episode environment."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolResult:
    """What one tool call returns to the agent: text for the context, and whether it failed.

    Tools never raise into the caller; a failure is a result with `is_error=True` and a message
    that tells the agent what to fix.
    """

    text: str
    is_error: bool = False

    @classmethod
    def error(cls, message: str) -> "ToolResult":
        return cls(text=f"Error: {message}", is_error=True)
