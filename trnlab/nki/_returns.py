"""A ``return`` written inside an affine or sequential loop body, run as NKI runs it.

NKI's tracer walks an ``nl.affine_range`` or ``nl.sequential_range`` body once, for all of its
iterations, so a ``return`` left at the end of the body (a slip of indentation, as in the
older profiling tutorial's kernel) still ends the kernel after the whole loop on hardware.
trnlab runs the iterations in Python, where the same ``return`` would stop after the first.

Before a kernel is traced its source is read (when Python has it: files and notebook cells):

- a ``return`` that ends such a loop body is moved to just after the loop, the way the tracer
  reads it, and the kernel runs rewritten, with a warning naming the line;
- a ``return`` anywhere else inside such a body is a teaching error, as is a slip the rewrite
  cannot make (a kernel with closure variables, a method, a decorated wrapper, a source file
  edited since the import);
- a kernel without source runs as written (so do the functions a kernel calls: only the
  kernel's own source is read).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
import warnings
import weakref
from collections.abc import Callable

from trnlab.core import KernelArgumentError

from ._trace import location

_LOOPS = {"affine_range", "sequential_range"}
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# kernel function -> (the rewritten function or None to run it as written, the warning or
# None); the value never holds the key, so a kernel's entry goes with it. Errors are raised
# each launch, not cached.
_DONE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _loop_kind(node: ast.AST, names: dict) -> str | None:
    """``"affine_range"`` / ``"sequential_range"`` when ``node`` is a for loop over one (as
    ``nl.affine_range(...)``, or a name the kernel's module binds to it), else None."""
    if not isinstance(node, ast.For) or not isinstance(node.iter, ast.Call):
        return None
    f = node.iter.func
    if isinstance(f, ast.Attribute):
        return f.attr if f.attr in _LOOPS else None
    if isinstance(f, ast.Name):
        if f.id in _LOOPS:
            return f.id
        from . import language

        for kind in _LOOPS:
            if names.get(f.id) is getattr(language, kind):
                return kind
    return None


def _returns_inside(body: list[ast.stmt]):
    """Every ``return`` statement of ``body`` (not those of functions defined in it)."""
    stack = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            yield node
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))


class _Hoist(ast.NodeTransformer):
    """Moves each return that ends a traced loop body after its loop; notes the others."""

    def __init__(self, names: dict) -> None:
        self.names = names
        self.moved: list[tuple[str, int]] = []  # (loop kind, line of the return)
        self.stray: list[tuple[str, int]] = []

    def visit_For(self, node: ast.For):
        self.generic_visit(node)  # inner loops first: their moved returns end this body
        kind = _loop_kind(node, self.names)
        if kind is None:
            return node
        body = node.body
        last = body[-1] if isinstance(body[-1], ast.Return) and not node.orelse else None
        for r in _returns_inside(body):
            if r is not last:
                self.stray.append((kind, r.lineno))
        if last is None:
            return node
        body.pop()
        if not body:
            body.append(ast.Pass())
        self.moved.append((kind, last.lineno))
        return [node, last]


def traced_function(fn: Callable, name: str, stacklevel: int = 4) -> Callable:
    """The function to trace for kernel ``fn``: ``fn`` itself, or ``fn`` with the returns that
    end its affine/sequential loop bodies moved after the loops (warned about each time, at
    the caller ``stacklevel`` frames up)."""
    try:
        got = _DONE.get(fn)
    except TypeError:  # not weakly referenceable: analysed every time
        got = None
    if got is None:
        got = _analyse(fn, name)
        try:
            _DONE[fn] = got
        except TypeError:
            pass
    new, warning = got
    if warning is not None:
        warnings.warn(warning, stacklevel=stacklevel)
    return fn if new is None else new


def _analyse(fn: Callable, name: str) -> tuple[Callable | None, str | None]:
    if isinstance(fn, functools.partial):  # the function it binds, bound again
        new, warning = _analyse(fn.func, name)
        return (None if new is None else functools.partial(new, *fn.args, **fn.keywords)), warning
    inner = inspect.unwrap(fn) if callable(fn) else fn
    code = getattr(inner, "__code__", None)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(inner)))
    except Exception:  # no source (or a half-typed file on disk): the kernel runs as written
        return None, None
    fdef = tree.body[0] if tree.body else None
    if code is None or not isinstance(fdef, ast.FunctionDef) or fdef.name != code.co_name:
        return None, None
    offset = code.co_firstlineno - 1
    names = getattr(inner, "__globals__", {})
    hoist = _Hoist(names)
    hoist.visit(fdef)
    if hoist.stray:
        kind, line = hoist.stray[0]
        raise KernelArgumentError(
            f"kernel {name}: the return at "
            f"{location(fdef.name, code.co_filename, line + offset)} is inside an nl.{kind} "
            f"loop body. NKI traces such a body once for all of its iterations, so a return "
            f"there does not stop the loop on hardware, while trnlab, which runs the iterations "
            f"in Python, would stop at the first one that reaches it. Compute what the loop "
            f"must leave and return after the loop."
        )
    if not hoist.moved:
        return None, None
    kind, line = hoist.moved[0]
    at = location(fdef.name, code.co_filename, line + offset)
    why = (
        f"the return at {at} ends an nl.{kind} loop body. NKI traces the body once for all of "
        f"its iterations, so on hardware the whole loop runs before the kernel returns"
    )
    new = _compiled(fn, inner, fdef, tree, offset) if inner is fn else None
    if new is None:
        raise KernelArgumentError(
            f"kernel {name}: {why}; trnlab, which runs the iterations in Python, would stop "
            f"after the first. Move the return after the loop (dedent it)."
        )
    return new, f"kernel {name}: {why}, and trnlab ran it that way. Dedent the return to say so."


def _compiled(fn: Callable, inner, fdef, tree, offset: int) -> Callable | None:
    """``tree`` compiled into a function like ``fn``, or None where that cannot be faithful:
    closure variables, a bound method, a source file that no longer holds the code Python
    runs, defaults or names the module cannot give."""
    code = fn.__code__
    if code.co_freevars or inspect.ismethod(fn) or not _same_code(tree, code):
        return None
    fdef.decorator_list = []
    fdef.args.defaults = [ast.Constant(None) for _ in fdef.args.defaults]  # fn's own, below
    fdef.args.kw_defaults = [
        None if d is None else ast.Constant(None) for d in fdef.args.kw_defaults
    ]
    ast.increment_lineno(tree, offset)  # messages keep the kernel's own lines
    namespace: dict = {}
    try:
        exec(
            compile(ast.fix_missing_locations(tree), code.co_filename, "exec"),
            fn.__globals__,
            namespace,
        )
    except Exception:  # anything the module cannot give: the caller explains
        return None
    new = namespace.get(fdef.name)
    if new is None:
        return None
    new.__defaults__ = fn.__defaults__
    new.__kwdefaults__ = fn.__kwdefaults__
    new.__qualname__ = fn.__qualname__
    return new


def _same_code(tree, code) -> bool:
    """Whether the source read (before any rewrite) is the code Python runs: its compiled
    function has the same variables and constants (a file edited since the import has not;
    bytecode itself differs between compile paths, assertion rewriting for one)."""
    try:
        module = compile(tree, code.co_filename, "exec")
    except Exception:
        return False
    return any(
        getattr(c, "co_name", None) == code.co_name
        and c.co_varnames == code.co_varnames
        and _plain(c.co_consts) == _plain(code.co_consts)
        for c in module.co_consts
    )


def _plain(consts) -> list:
    return [repr(c) for c in consts if not inspect.iscode(c)]
