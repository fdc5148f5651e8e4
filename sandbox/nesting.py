"""How deeply a JSON-like value nests, measured without recursion.

Model-written JSON can nest thousands of levels deep; `json`, `repr` and every recursive walk
over such a value raise RecursionError. Callers check the depth first with this iterative walk
and answer an over-deep value with an error result.
"""

from typing import Any

MAX_JSON_DEPTH = 32  # far beyond any real tool argument or memory value


def nested_deeper_than(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether lists/tuples/dicts in `value` nest more than `limit` levels (a scalar is level 0)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, tuple, dict)):
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth + 1) for child in children)
    return False
