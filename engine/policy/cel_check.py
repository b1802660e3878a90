"""Static checks of a CEL expression at load: fields, functions, operators and the result type, with columns.

A dry run on sample objects only sees the branches the samples take: ``cluster.name == 'h100' &&
job.nme == 'x'`` short-circuits on ``false`` and ``true || x`` never looks at ``x``. This walks the
whole syntax tree (cel-python's lark tree) instead and types every node:

- a field of a documented object (``job.nme``) must exist (``engine.policy.cel_vars.FIELDS``);
- a function or method must exist in the runtime for those argument types (``engine.policy.cel_types``);
- operators need CEL's overloads (``job.priority + 1.5`` is an error: CEL never converts numbers);
- ``&&``, ``||``, ``!`` and a ternary's condition need bools; the result must be what the plugin needs.

What stays for run time (docs/policy.md, "Checked at load"): map keys (``job.labels['tier']`` may be
absent), values typed ``dyn``, division by zero, overflow, conversions such as ``int('x7')``.
Also enforced here: ``MAX_MACRO_NESTING`` nested comprehensions, part of the evaluation budget's static half
(the rest, text size and syntax nodes, is ``engine.policy.cel_size``; the time half is ``engine.policy.cel_budget``).
"""

from __future__ import annotations

import difflib
from typing import Any, Mapping, Optional, Sequence

import lark

from engine.policy.cel_types import (BOOL, BYTES, DOUBLE, DURATION, DYN, FUNCTIONS, INT, MACROS, METHODS, NULL,
                                     ORDERED, REFUSED, STRING, TIMESTAMP, TYPE, TYPE_NAMES, UINT, CelType, ListT,
                                     MapT, ObjT, Prim, compatible, is_dyn, join)
from engine.policy.cel_size import MAX_MACRO_NESTING

_CONVERT_HINT = " (CEL never converts types implicitly: write int(x), double(x) or string(x))"

RESULTS: dict[str, tuple[CelType, ...]] = {"int": (INT,), "number": (INT, DOUBLE), "bool": (BOOL,),
                                           "string": (STRING,)}


class CelCheckError(Exception):
    """One problem, with the tree node it is about (for the column)."""

    def __init__(self, message: str, node: Any) -> None:
        super().__init__(message)
        self.message = message
        self.line, self.column = _position(node)


class Checker:
    """Types one expression's tree. ``scope`` maps variable names to their types."""

    def __init__(self, scope: Mapping[str, CelType]) -> None:
        self.scope = dict(scope)
        self.macro_depth = 0

    def check(self, tree: Any, result: str) -> CelType:
        found = self.visit(tree)
        wanted = RESULTS.get(result)
        if wanted is not None and not is_dyn(found) and found not in wanted:
            raise CelCheckError(f"must return {result}, returned {found}", tree)
        return found

    # -- dispatch -------------------------------------------------------------------------------------
    def visit(self, node: Any) -> CelType:
        if not isinstance(node, lark.Tree):
            raise CelCheckError(f"unexpected token {node!r}", node)
        method = getattr(self, f"_{node.data}", None)
        if method is None:
            raise CelCheckError(f"{node.data.replace('_', ' ')} is not supported", node)
        found: CelType = method(node)
        return found

    def _passthrough(self, node: lark.Tree) -> CelType:
        return self.visit(node.children[0])

    _member = _primary = _paren_expr = _passthrough

    def _expr(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        condition, yes, no = node.children
        self._need_bool(condition, "the condition of ? :")
        return join(self.visit(yes), self.visit(no))

    def _conditionalor(self, node: lark.Tree) -> CelType:
        return self._logic(node, "||")

    def _conditionaland(self, node: lark.Tree) -> CelType:
        return self._logic(node, "&&")

    def _logic(self, node: lark.Tree, op: str) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        for child in node.children:
            self._need_bool(child, f"each side of {op}")
        return BOOL

    def _need_bool(self, node: Any, what: str) -> None:
        found = self.visit(node)
        if found != BOOL and not is_dyn(found):
            raise CelCheckError(f"{what} must be a bool, got {found}", node)

    def _relation(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        op_node, right_node = node.children
        op = op_node.data.removeprefix("relation_")
        left, right = self.visit(op_node.children[0]), self.visit(right_node)
        if op == "in":
            if is_dyn(right):
                return BOOL
            if isinstance(right, ListT) and compatible(left, right.elem):
                return BOOL
            if isinstance(right, (MapT, ObjT)) and compatible(left, STRING if isinstance(right, ObjT) else right.key):
                return BOOL
            raise CelCheckError(f"no such overload: {left} in {right} ('in' needs a list of, or a map keyed by, "
                                f"{left}){_CONVERT_HINT}", node)
        if op in ("eq", "ne"):
            if compatible(left, right):
                return BOOL
            raise CelCheckError(f"no such overload: cannot compare {left} and {right}{_CONVERT_HINT}", node)
        if (left == right and left in ORDERED) or is_dyn(left) or is_dyn(right):
            return BOOL
        raise CelCheckError(f"no such overload: cannot compare {left} and {right}{_CONVERT_HINT}", node)

    def _addition(self, node: lark.Tree) -> CelType:
        return self._arith(node)

    def _multiplication(self, node: lark.Tree) -> CelType:
        return self._arith(node)

    def _arith(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        op_node, right_node = node.children
        op = {"add": "+", "sub": "-", "mul": "*", "div": "/", "mod": "%"}[op_node.data.split("_")[1]]
        left, right = self.visit(op_node.children[0]), self.visit(right_node)
        found = _arith_result(op, left, right)
        if found is None:
            what = "the operands have different types" if left != right else f"{left} {op} {right} is not defined"
            raise CelCheckError(f"no such overload: {what} ({left} {op} {right}){_CONVERT_HINT}", node)
        return found

    def _unary(self, node: lark.Tree) -> CelType:
        if len(node.children) == 1:
            return self.visit(node.children[0])
        op_node, operand = node.children
        found = self.visit(operand)
        if op_node.data == "unary_not":
            if found != BOOL and not is_dyn(found):
                raise CelCheckError(f"no such overload: !{found} (! needs a bool)", node)
            return BOOL
        if found in (INT, DOUBLE, DURATION) or is_dyn(found):
            return found
        raise CelCheckError(f"no such overload: -{found}", node)

    # -- names, fields, calls ---------------------------------------------------------------------------
    def _ident(self, node: lark.Tree) -> CelType:
        token = node.children[0]
        name = str(token)
        if name in self.scope:
            return self.scope[name]
        if name in TYPE_NAMES:
            return TYPE
        raise CelCheckError(f"unknown variable {name!r}; available here: {sorted(self.scope)}", token)

    _dot_ident = _ident

    def _member_dot(self, node: lark.Tree) -> CelType:
        base_node, token = node.children
        return self._field(self.visit(base_node), str(token), token)

    def _field(self, base: CelType, name: str, where: Any) -> CelType:
        if isinstance(base, ObjT):
            if name in base.fields:
                return base.fields[name]
            fields = sorted(base.fields)
            close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}?" if close else f"fields: {', '.join(fields)}"
            raise CelCheckError(f"no such field or key {name!r} %AT%; {hint}", where)
        if isinstance(base, MapT):
            if not compatible(base.key, STRING):
                raise CelCheckError(f"cannot select .{name} from {base} (its keys are not strings)", where)
            return base.value
        if is_dyn(base):
            return DYN
        raise CelCheckError(f"cannot select field .{name} from a {base}", where)

    def _member_index(self, node: lark.Tree) -> CelType:
        base_node, index_node = node.children
        base, index = self.visit(base_node), self.visit(index_node)
        if is_dyn(base):
            return DYN
        if isinstance(base, ListT):
            if index in (INT, UINT) or is_dyn(index):
                return base.elem
            raise CelCheckError(f"a list index must be an int, got {index}", index_node)
        if isinstance(base, ObjT):
            literal = _string_literal(index_node)
            if literal is not None:
                return self._field(base, literal, index_node)
            if compatible(index, STRING):
                return DYN
        if isinstance(base, MapT):
            if compatible(index, base.key):
                return base.value
            raise CelCheckError(f"a key of {base} must be a {base.key}, got {index}{_CONVERT_HINT}", index_node)
        raise CelCheckError(f"cannot index a {base}", node)

    def _ident_arg(self, node: lark.Tree) -> CelType:
        token, args = node.children[0], _args(node)
        name = str(token)
        if name == "has":
            if len(args) != 1 or _unwrap(args[0]).data != "member_dot":
                raise CelCheckError("has() takes one field selection, e.g. has(job.labels.tier)", node)
            self.visit(args[0])          # the object and field must exist; only a map key may be absent
            return BOOL
        if name == "dyn":
            if len(args) != 1:
                raise CelCheckError("dyn() takes one argument", node)
            self.visit(args[0])
            return DYN
        return self._call(name, [self.visit(a) for a in args], FUNCTIONS, token, f"{name}()")

    def _member_dot_arg(self, node: lark.Tree) -> CelType:
        base_node, token, args = node.children[0], node.children[1], _args(node)
        name = str(token)
        if name in MACROS:
            return self._macro(name, self.visit(base_node), args, token)
        receiver = self.visit(base_node)
        return self._call(name, [receiver] + [self.visit(a) for a in args], METHODS, token, f"{receiver}.{name}()")

    def _call(self, name: str, types: list[CelType], table: Mapping[str, Any], where: Any, shown: str) -> CelType:
        if name in REFUSED:
            raise CelCheckError(f"{name}() is not available in policies: {REFUSED[name]}", where)
        signature = table.get(name)
        if signature is None:
            known = ", ".join(sorted(table))
            close = difflib.get_close_matches(name, list(table), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            kind = "method" if table is METHODS else "function"
            raise CelCheckError(f"no {kind} {name!r} in this CEL runtime ({hint}{kind}s: {known})", where)
        found: Optional[CelType] = signature(types)
        if found is None:
            got = ", ".join(map(str, types))
            raise CelCheckError(f"no such overload: {shown} does not take ({got}){_CONVERT_HINT}", where)
        return found

    def _macro(self, name: str, collection: CelType, args: Sequence[Any], where: Any) -> CelType:
        if len(args) != 2 or _ident_name(args[0]) is None:
            raise CelCheckError(f"{name}() takes a variable name and an expression, e.g. {name}(t, ...)", where)
        var = _ident_name(args[0])
        assert var is not None
        if isinstance(collection, ListT):
            elem = collection.elem
        elif isinstance(collection, MapT):
            elem = collection.key
        elif isinstance(collection, ObjT):
            elem = STRING
        elif is_dyn(collection):
            elem = DYN
        else:
            raise CelCheckError(f"{name}() needs a list or a map, got {collection}", where)
        if self.macro_depth >= MAX_MACRO_NESTING:
            raise CelCheckError(f"comprehensions nested deeper than {MAX_MACRO_NESTING} (the evaluation "
                                "budget)", where)
        saved = self.scope.get(var)
        self.scope[var] = elem
        self.macro_depth += 1
        try:
            if name in ("all", "exists", "exists_one", "filter"):
                self._need_bool(args[1], f"the predicate of {name}()")
                body: CelType = BOOL
            else:
                body = self.visit(args[1])
        finally:
            self.macro_depth -= 1
            if saved is None:
                del self.scope[var]
            else:
                self.scope[var] = saved
        if name == "map":
            return ListT(body)
        if name == "filter":
            return ListT(elem)
        return BOOL

    # -- literals -------------------------------------------------------------------------------------------
    def _literal(self, node: lark.Tree) -> CelType:
        kind = getattr(node.children[0], "type", "")
        return {"INT_LIT": INT, "UINT_LIT": UINT, "FLOAT_LIT": DOUBLE, "STRING_LIT": STRING,
                "MLSTRING_LIT": STRING, "BYTES_LIT": BYTES, "BOOL_LIT": BOOL, "NULL_LIT": NULL}.get(kind, DYN)

    def _list_lit(self, node: lark.Tree) -> CelType:
        elem: CelType = NULL
        for item in _args(node):
            elem = join(elem, self.visit(item)) if elem != NULL else self.visit(item)
        return ListT(DYN if elem == NULL else elem)

    def _map_lit(self, node: lark.Tree) -> CelType:
        items = node.children[0].children if node.children else []
        key: Optional[CelType] = None
        value: Optional[CelType] = None
        for k_node, v_node in zip(items[::2], items[1::2]):
            k, v = self.visit(k_node), self.visit(v_node)
            key = k if key is None else join(key, k)
            value = v if value is None else join(value, v)
        return MapT(key or DYN, value or DYN)


def _arith_result(op: str, left: CelType, right: CelType) -> Optional[CelType]:
    if is_dyn(left) or is_dyn(right):
        return right if is_dyn(left) else left
    if left == right and left in (INT, UINT):
        return left
    if left == right == DOUBLE and op != "%":
        return DOUBLE
    if op == "+":
        if left == right and left in (STRING, BYTES, DURATION):
            return left
        if isinstance(left, ListT) and isinstance(right, ListT):
            return ListT(join(left.elem, right.elem))
        if {left, right} == {TIMESTAMP, DURATION}:
            return TIMESTAMP
    if op == "-":
        if left == right == TIMESTAMP:
            return DURATION
        if left == TIMESTAMP and right == DURATION:
            return TIMESTAMP
        if left == right == DURATION:
            return DURATION
    return None


def _args(node: lark.Tree) -> list[Any]:
    """The expressions of a call's optional ``exprlist``."""
    for child in node.children:
        if isinstance(child, lark.Tree) and child.data == "exprlist":
            return list(child.children)
    return []


def _unwrap(node: Any) -> Any:
    """Down through single-child wrappers (expr -> conditionalor -> ... -> member) to the first real node."""
    while isinstance(node, lark.Tree) and len(node.children) == 1 and isinstance(node.children[0], lark.Tree) \
            and node.data in ("expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
                              "unary", "member", "primary"):
        node = node.children[0]
    return node


def _ident_name(node: Any) -> Optional[str]:
    inner = _unwrap(node)
    if isinstance(inner, lark.Tree) and inner.data == "ident":
        return str(inner.children[0])
    return None


def _string_literal(node: Any) -> Optional[str]:
    inner = _unwrap(node)
    if isinstance(inner, lark.Tree) and inner.data == "literal" and \
            getattr(inner.children[0], "type", "") == "STRING_LIT":
        text = str(inner.children[0])
        if text[:1] in "'\"" and "\\" not in text:
            return text[1:-1]
    return None


def _position(node: Any) -> tuple[Optional[int], Optional[int]]:
    if isinstance(node, lark.Token):
        return node.line, node.column
    if isinstance(node, lark.Tree):
        if not node.meta.empty:
            return node.meta.line, node.meta.column
        for child in node.children:
            found = _position(child)
            if found[1] is not None:
                return found
    return None, None


def type_scope(variables: Sequence[str]) -> dict[str, CelType]:
    """The checker's scope for a plugin field that may read ``variables``."""
    from engine.policy.cel_vars import OBJECTS

    return {name: OBJECTS[name] for name in variables}


__all__ = ["Checker", "CelCheckError", "MAX_CHARS", "MAX_NODES", "MAX_DEPTH", "MAX_MACRO_NESTING", "check_size",
           "check_tree", "type_scope", "Prim", "ObjT"]
