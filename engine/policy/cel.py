"""CEL for the tunable parts of a policy: compiled once at load, type-checked, cheap to call.

A policy's CEL expression sees plain data built from the engine's model (see
``engine.policy.cel_vars`` for every variable and field). ``CelCompiler.compile`` parses
the text, type-checks the whole tree (``engine.policy.cel_check``), then *dry-evaluates* it against
sample objects so that a misspelt field
(``job.prority``) or a wrong result type fails when the policy is loaded, with the
file, the YAML path and the column, rather than at 3 a.m. on a real job.

cel-python's runner is slow (~100-250 us per evaluation), so plugins evaluate an
expression when its inputs change (a job's ``generation``, a cluster's), never per
comparison; ``CelExpression.evaluate`` is the one call site, so that rule is easy to
see in review.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import celpy
from celpy import celtypes
from celpy.evaluation import CELEvalError

from engine.errors import InputError
from engine.policy.cel_budget import EVAL_CPU_BUDGET, TIMER, BudgetExceeded, over_budget
from engine.policy.cel_check import CelCheckError, Checker, type_scope
from engine.policy.cel_size import check_size, check_tree

# celpy logs every evaluation error at ERROR with a traceback before raising it; we report it ourselves.
logging.getLogger("celpy").setLevel(logging.CRITICAL)

# Checked on the plain Python value (``from_cel``): the compiled runner may hand back a bare
# float or int instead of a celtypes value. bool is excluded from int/number explicitly.
RESULT_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "number": (int, float),
    "bool": (bool,),
    "string": (str,),
    "any": (object,),
}


class CelRuntimeError(Exception):
    """An expression failed on a real object (e.g. a label the sample had but this job lacks)."""


@dataclass(frozen=True)
class CelExpression:
    """One compiled expression. ``where`` names it in every message (``policy.yaml: spec.plugins.x.y``)."""

    text: str
    where: str
    variables: tuple[str, ...]
    result: str
    _program: Any

    def evaluate(self, activation: Mapping[str, Any]) -> Any:
        """Evaluate with plain Python values (dicts, lists, ints, strs) and return a plain value.

        Raises CelRuntimeError naming the expression on any evaluation error or wrong result type."""
        cel_activation = {name: to_cel(value) for name, value in activation.items()}
        return self.evaluate_cel(cel_activation)

    def evaluate_cel(self, activation: Mapping[str, Any]) -> Any:
        """Like ``evaluate`` with values already converted by ``to_cel`` (lets callers cache conversions).

        At most ``EVAL_CPU_BUDGET`` seconds of CPU (``engine.policy.cel_budget``), else CelRuntimeError."""
        started = TIMER.start(EVAL_CPU_BUDGET)
        try:
            try:
                value = self._program.evaluate(activation)
            finally:
                TIMER.stop()
        except BudgetExceeded:
            raise CelRuntimeError(self._over_budget()) from None
        except CELEvalError as exc:
            raise CelRuntimeError(f"{self.where}: {self.text!r}: {_lost_cause(describe_eval_error(exc))}") from None
        except Exception as exc:          # cel-python raises plain TypeErrors for some overload mistakes
            raise CelRuntimeError(f"{self.where}: {self.text!r}: {_lost_cause(str(exc))}") from None
        if not TIMER.armed and over_budget(started, EVAL_CPU_BUDGET) and TIMER.usable is False:
            raise CelRuntimeError(self._over_budget())
        if isinstance(value, CELEvalError):
            raise CelRuntimeError(f"{self.where}: {self.text!r}: {describe_eval_error(value)}")
        plain = from_cel(value)
        wrong_bool = isinstance(plain, bool) and self.result in ("int", "number")
        if wrong_bool or not isinstance(plain, RESULT_TYPES[self.result]):
            raise CelRuntimeError(f"{self.where}: {self.text!r} must return {self.result}, "
                                  f"returned {_cel_type_name(value)}")
        return plain

    def _over_budget(self) -> str:
        return (f"{self.where}: {self.text!r}: used more than {EVAL_CPU_BUDGET * 1000:g} ms of CPU in one "
                "evaluation (the evaluation budget; see docs/policy.md)")


_ENVIRONMENT: Optional[celpy.Environment] = None


def _environment() -> celpy.Environment:
    """One celpy Environment per process: the first builds the CEL parser (~0.4 s) and raises the
    recursion limit; celpy's parser is a class-level singleton anyway, so sharing loses nothing."""
    global _ENVIRONMENT
    if _ENVIRONMENT is None:
        _ENVIRONMENT = celpy.Environment(runner_class=celpy.CompiledRunner)
    return _ENVIRONMENT


class CelCompiler:
    """Compiles a policy's expressions; one per policy load. Not thread-safe (neither is celpy)."""

    def __init__(self) -> None:
        self._env = _environment()

    def compile(self, text: str, where: str, variables: Sequence[str] = ("job",), result: str = "any",
                samples: Optional[Sequence[Mapping[str, Any]]] = None) -> CelExpression:
        """Parse ``text`` and dry-run it against sample activations of ``variables``.

        ``variables`` are names from ``engine.policy.cel_vars.VARIABLES``; ``result`` one of
        RESULT_TYPES. Raises InputError naming ``where`` and the column of a syntax error,
        an unknown variable or field, or a result of the wrong type."""
        from engine.policy.cel_vars import VARIABLES, sample_activations

        if result not in RESULT_TYPES:
            raise ValueError(f"unknown CEL result type {result!r}")
        unknown = [v for v in variables if v not in VARIABLES]
        if unknown:
            raise ValueError(f"unknown CEL variables {unknown}")
        if not isinstance(text, str) or not text.strip():
            raise InputError("CEL expression must be a non-empty string", where)
        too_big = check_size(text)
        if too_big:
            raise InputError(f"CEL expression refused: {too_big} (the evaluation budget)", where)
        try:
            ast = self._env.compile(text)
        except celpy.CELParseError as exc:
            raise InputError(f"CEL syntax error {_position(text, exc)} in {text!r}: {_parse_message(exc)}",
                             where) from None
        except RecursionError:
            raise InputError(f"CEL expression {text[:60]!r}... nests too deeply to parse", where) from None
        too_big = check_tree(ast)
        if too_big:
            raise InputError(f"CEL expression refused: {too_big} (the evaluation budget)", where)
        undeclared = _free_identifiers(text) - set(variables)
        if undeclared:
            offset = min(_ident_at(text, name) for name in undeclared)
            raise InputError(f"CEL expression {text!r} uses unknown variable(s) {sorted(undeclared)} "
                             f"(first at {_column_of(text, offset)}); "
                             f"available here: {list(variables)}", where)
        try:
            Checker(type_scope(variables)).check(ast, result)
        except CelCheckError as exc:
            raise InputError(_check_message(text, exc), where) from None
        try:
            program = _fix_transpiled(self._env.program(ast))
        except Exception as exc:  # celpy's compiled runner transpiles at this point
            raise InputError(f"CEL expression {text!r} cannot be compiled: {exc}", where) from None
        expression = CelExpression(text, where, tuple(variables), result, program)
        first: Optional[CelRuntimeError] = None
        for activation in samples if samples is not None else sample_activations(variables):
            try:
                expression.evaluate_cel(activation)
                return expression          # one sample shape that works is enough (values vary: "", "1", 0)
            except CelRuntimeError as exc:
                first = first or exc
        if first is not None:
            message = str(first).removeprefix(f"{where}: ")
            hint = _field_hint(message, variables, text)
            raise InputError(f"{message}{hint} (checked against sample {', '.join(variables)} objects; "
                             "see docs/policy.md for the fields)", where) from None
        return expression


# Two fixes to cel-python 0.5.0's compiled runner, made in the source it transpiles (then compiled again):
# * has(e.f) becomes a lambda returning Python's bool, not a CEL BoolType, so every operator taking a CEL bool
#   then fails on it: ``!has(job.labels.tier)`` and ``x in m && has(...)`` raise "no such overload" on every
#   object (the interpreted runner is right: ``macro_has_eval`` wraps it). We wrap it the same way.
# * ``c ? x : y`` hands on the chosen branch's error as a *value* (``logical_condition``); the operator after it
#   then fails on that value's type (``1 + (c ? 1 : 1 / 0)`` says "no such overload", not "divide by zero").
#   In CEL an error in the chosen branch is the result: ``_condition`` raises its cause again, and celpy's
#   ``result`` wrapper around the enclosing sub-expression turns it back into that error.
_HAS_LINE = re.compile(r"^(\s*ex_\d+ = lambda activation: )"
                       r"(not isinstance\(celpy\.evaluation\.result\(activation, ex_\d+_h\), CELEvalError\))$",
                       re.MULTILINE)
_CONDITION = "celpy.celtypes.logical_condition("


# what celpy's ``result`` wrapper turns into a CEL error value (it lets anything else through)
_CHECKED = (ValueError, KeyError, TypeError, ZeroDivisionError, OverflowError, IndexError, NameError)


def _condition(e: Any, x: Any, y: Any) -> Any:
    """``e ? x : y`` where an error in the chosen branch is raised again, not returned, so the ``result``
    wrapper around the enclosing sub-expression makes it that sub-expression's error (``||``/``&&`` still
    absorb it as CEL says: ``true || error`` is true)."""
    value = celtypes.logical_condition(e, x, y)
    if isinstance(value, CELEvalError) and isinstance(value.__cause__, _CHECKED):
        raise value.__cause__
    return value


def _fix_transpiled(program: Any) -> Any:
    tp = getattr(program, "tp", None)
    source = getattr(tp, "source_text", None)
    if tp is None or not isinstance(source, str):
        return program
    fixed = source
    if "# ident_arg has:" in source:
        fixed, count = _HAS_LINE.subn(r"\1celpy.celtypes.BoolType(\2)", fixed)
        if count != source.count("# ident_arg has:"):   # cel-python changed its template: fail loudly, in tests
            raise RuntimeError("cannot make has() return a CEL bool in this cel-python version")
    if _CONDITION in fixed:
        # the code runs in celpy.evaluation's globals: reach ``_condition`` through the import system
        fixed = fixed.replace(_CONDITION, f"__import__({__name__!r}, fromlist=['_condition'])._condition(")
    if fixed is not source:
        tp.source_text = fixed
        tp.executable_code = compile(fixed, "<string>", "exec")
    return program


# -- conversion -------------------------------------------------------------------------
def to_cel(value: Any) -> Any:
    """Plain Python -> CEL value. Values that are already CEL pass through unchanged."""
    if isinstance(value, (celtypes.MapType, celtypes.ListType)):
        return value
    return celpy.json_to_cel(value)


def from_cel(value: Any) -> Any:
    """CEL value -> plain Python (bool before int: CEL's BoolType is an int subclass)."""
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, celtypes.DoubleType):
        return float(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    if isinstance(value, celtypes.MapType):
        return {from_cel(k): from_cel(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [from_cel(v) for v in value]
    return value


# -- messages -----------------------------------------------------------------------------
def describe_eval_error(exc: BaseException) -> str:
    """The innermost useful words of a (nested) CELEvalError, without celpy's activation dumps."""
    parts: list[str] = []
    _collect(exc, parts)
    text = "; ".join(dict.fromkeys(p for p in parts if p))
    text = re.sub(r"<class '(?:celpy\.)?(?:celtypes\.|evaluation\.)?(\w+)'>", r"\1", text)
    if "Unexpected CELEvalError" in text:
        # an operator (e.g. ``?:``) handed an operand that had already failed: cel-python keeps only the operand's
        # type, so the first error's text is lost (as in _lost_cause); the expression type-checked, so it was a value
        return "value error in an operand (e.g. divide by zero, overflow or a missing key inside it)"
    compared = _COMPARED.search(text)
    if compared:
        left, right = (_cel_kind(t) for t in compared.groups())
        text = f"no such overload: cannot compare {left} and {right}{_CONVERT_HINT}"
    elif "NotImplementedType" in text or "unsupported operand" in text:
        text = f"no such overload: the operands have different types{_CONVERT_HINT}"
    text = re.sub(r"no such member in mapping: (?:StringType\()?'([^']+)'\)?(; \1)?", r"no such field or key '\1'",
                  text)
    text = text.replace("return error for overflow; overflow", "integer overflow")
    text = text.replace("return error for overflow; ", "")
    text = re.sub(r"invalid literal for int\(\) with base 10: ", "not an integer: ", text)
    text = _CEL_VALUE.sub(r"\2", text)                  # StringType('x') -> 'x', IntType(1) -> 1
    text = text.removeprefix("evaluation error; ")
    return (text[:300] + "...") if len(text) > 300 else text or "evaluation error"


_COMPARED = re.compile(r"no such overload: \w+Type\(.*?\) (\w+)Type != \w+Type\(.*?\) (\w+)Type")
_CEL_VALUE = re.compile(r"\b(String|Int|Uint|Double|Bool)Type\(([^()]*)\)")
_CONVERT_HINT = " (CEL never converts types implicitly: write int(x), double(x) or string(x))"


def _cel_kind(name: str) -> str:
    return {"Int": "int", "Uint": "uint", "Double": "double", "String": "string", "Bool": "bool"}.get(name, name)


def _collect(item: Any, parts: list[str]) -> None:
    if isinstance(item, BaseException):
        for arg in item.args:
            _collect(arg, parts)
    elif isinstance(item, tuple):
        for arg in item:
            _collect(arg, parts)
    elif isinstance(item, str):
        if item not in ("evaluation error", "no such overload"):
            parts.append(item)
        elif not parts:
            parts.append(item)
    elif isinstance(item, type):
        return
    else:
        parts.append(str(item)[:120])


def _parse_message(exc: Exception) -> str:
    """celpy's message is the offending line plus a caret line; keep both on one line."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return " | ".join(lines[:3])


def _check_message(text: str, exc: CelCheckError) -> str:
    """``'job.nme == 1': no such field or key 'nme' at column 5; did you mean 'name'?``"""
    multi = "\n" in text.strip()
    at = (f"line {exc.line}, column {exc.column}" if multi and exc.line else f"column {exc.column}") \
        if exc.column else "an unknown position"
    if exc.message.startswith("must return"):
        return f"{text!r} {exc.message}"
    if "%AT%" in exc.message:
        return f"{text!r}: {exc.message.replace('%AT%', f'at {at}')}"
    return f"{text!r}: {exc.message} (at {at})"


def _position(text: str, exc: celpy.CELParseError) -> str:
    """``at column 14`` (1-based, as celpy reports), with the line for multi-line expressions."""
    line, column = getattr(exc, "line", None), getattr(exc, "column", None)
    if column is None:
        return "at an unknown position"
    if "\n" in text.strip() and line is not None:
        return f"at line {line}, column {column}"
    return f"at column {column}"


_NO_MEMBER = re.compile(r"no such field or key '([^']+)'")


def _field_hint(message: str, variables: Sequence[str], text: str) -> str:
    """For a misspelt field: where it is and the closest real one (``at column 5; did you mean 'priority'?``)."""
    import difflib

    from engine.policy.cel_vars import VARIABLES

    match = _NO_MEMBER.search(message)
    if not match:
        return ""
    name = match.group(1)
    found = re.search(rf"\.\s*({re.escape(name)})\b", text)
    where = f" at {_column_of(text, found.start(1))}" if found else ""
    fields = sorted({f for v in variables for f in VARIABLES[v]})
    close = difflib.get_close_matches(name, fields, n=1, cutoff=0.6)
    return where + (f"; did you mean {close[0]!r}?" if close else f"; fields: {', '.join(fields)}")


def _column_of(text: str, offset: int) -> str:
    """``column 5`` (1-based), with the line when the expression spans several."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return f"line {line}, column {column}" if "\n" in text.strip() else f"column {column}"


_IDENT = re.compile(r"(?<![\w.'\"])([A-Za-z_]\w*)")
_STRING = re.compile(r"'(?:\\.|[^'\\])*'|\"(?:\\.|[^\"\\])*\"")
_CEL_WORDS = {"true", "false", "null", "in", "has", "size", "int", "uint", "double", "string", "bool", "bytes",
              "type", "duration", "timestamp", "matches", "startsWith", "endsWith", "contains", "exists",
              "all", "exists_one", "map", "filter", "dyn", "list", "max", "min"}


def _ident_at(text: str, name: str) -> int:
    """Offset of the first free occurrence of ``name`` (0 if not found)."""
    found = re.search(rf"(?<![\w.'\"]){re.escape(name)}\b", text)
    return found.start() if found else 0


def _free_identifiers(text: str) -> set[str]:
    """Top-level names an expression reads, minus CEL's own words and macro loop variables."""
    stripped = re.sub(r"\s*\.\s*", ".", _STRING.sub("''", text))     # "job . priority" is "job.priority"
    loop_vars = set(re.findall(r"\.\s*(?:all|exists|exists_one|map|filter)\s*\(\s*([A-Za-z_]\w*)\s*,", stripped))
    names = set()
    for match in _IDENT.finditer(stripped):
        name = match.group(1)
        following = stripped[match.end():].lstrip()
        if following.startswith("("):      # a function: the static check knows which exist
            continue
        names.add(name)
    return names - _CEL_WORDS - loop_vars


def _cel_type_name(value: Any) -> str:
    name = type(value).__name__.removesuffix("Type").lower()
    return {"float": "double", "str": "string", "dict": "map"}.get(name, name)


def _lost_cause(message: str) -> str:
    """cel-python keeps errors as values: a conversion (``double()``, ``int()``, ...) handed an argument that had
    already failed (e.g. a division by zero) complains about its argument's type, 'CELEvalError', and the first
    error's text is lost. What failed was a value, not a type: say so."""
    if "CELEvalError" in message:
        return "value error in a function's argument (e.g. divide by zero or overflow inside it)"
    return message
