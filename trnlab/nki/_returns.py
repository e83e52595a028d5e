"""A ``return`` written inside an affine or sequential loop body, run as NKI runs it.

NKI's tracer walks an ``nl.affine_range`` or ``nl.sequential_range`` body once, for all of its
iterations, so a ``return`` left at the end of the body (a slip of indentation, as in the
older profiling tutorial's kernel) still ends the kernel after the whole loop on hardware.
trnlab runs the iterations in Python, where the same ``return`` stops after the first. This
module rewrites such a kernel the way the tracer reads it: each loop over those ranges whose
body ends in a ``return`` gets the ``return`` moved to just after the loop. Only that one form
is rewritten; anything else (a ``return`` in the middle of a body, a ``break``, a function with
closure variables or without source) is left to the teaching error of ``trnlab.nki._kernel``.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
import weakref
from collections.abc import Callable

_LOOPS = {"affine_range", "sequential_range"}
_DONE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # fn -> rewritten fn or None


def _is_traced_loop(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
    return name in _LOOPS


class _Hoist(ast.NodeTransformer):
    def __init__(self) -> None:
        self.moved = 0

    def visit_For(self, node: ast.For):
        self.generic_visit(node)
        body = node.body
        if _is_traced_loop(node.iter) and not node.orelse and isinstance(body[-1], ast.Return):
            ret = body.pop()
            if not body:
                body.append(ast.Pass())
            self.moved += 1
            return [node, ret]
        return node


def returns_hoisted(fn: Callable) -> Callable | None:
    """``fn`` with every return that ends an affine/sequential loop body moved after its loop,
    or None when it has none (or cannot be rewritten: no source, closure variables)."""
    try:
        return _DONE[fn]
    except (KeyError, TypeError):
        pass
    new = _rewrite(fn)
    try:
        _DONE[fn] = new
    except TypeError:
        pass
    return new


def _rewrite(fn: Callable) -> Callable | None:
    code = getattr(fn, "__code__", None)
    if code is None or code.co_freevars:
        return None
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    fdef = tree.body[0] if tree.body else None
    if not isinstance(fdef, ast.FunctionDef) or fdef.name != fn.__name__:
        return None
    fdef.decorator_list = []
    hoist = _Hoist()
    hoist.visit(fdef)
    if not hoist.moved:
        return None
    ast.increment_lineno(tree, code.co_firstlineno - 1)  # messages keep the kernel's lines
    namespace: dict = {}
    exec(
        compile(ast.fix_missing_locations(tree), code.co_filename, "exec"),
        fn.__globals__,
        namespace,
    )
    new = namespace[fdef.name]
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new
