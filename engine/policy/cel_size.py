"""The evaluation budget's static half: how large a CEL expression may be, checked at load before it is typed.

An expression's text and tree bound what one evaluation can cost per element of the objects it reads, so a
policy is refused at load when its text is over ``MAX_CHARS`` characters, nests brackets deeper than the
parser can take, or parses into more than ``MAX_NODES`` syntax nodes or ``MAX_DEPTH`` levels. Comprehensions
nested more than ``MAX_MACRO_NESTING`` deep are refused while the tree is typed (``engine.policy.cel_check``).
The time half is ``engine.policy.cel_budget``.
"""

from __future__ import annotations

from typing import Any, Optional

import lark

MAX_CHARS = 2000             # expression text
MAX_NODES = 1500             # syntax-tree nodes (``job.priority + 1`` has 19)
MAX_DEPTH = 300              # tree levels (each parenthesis adds ~10)
MAX_MACRO_NESTING = 2        # ``job.tasks.all(t, t.resources.exists(r, ...))`` is 2


def check_size(text: str) -> Optional[str]:
    """A message when the text is over MAX_CHARS or nests brackets deeper than the parser can take."""
    if len(text) > MAX_CHARS:
        return f"the expression is {len(text):,} characters long; at most {MAX_CHARS:,}"
    depth = deepest = 0
    quote = ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote          # escapes do not matter for counting brackets
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    if deepest > 32:
        return f"brackets nested {deepest} deep; at most 32"
    return None


def check_tree(tree: Any) -> Optional[str]:
    """The budget's static half: node count and depth, measured without recursion."""
    nodes, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            return f"the expression has more than {MAX_NODES:,} syntax nodes"
        if depth > MAX_DEPTH:
            return f"the expression nests deeper than {MAX_DEPTH} syntax levels"
        if isinstance(node, lark.Tree):
            stack.extend((child, depth + 1) for child in node.children)
    return None
