"""Inlining calls into one function body (the entry of a coarsened CUDA kernel, emit/cuda.py), so
that passes/value_numbering.py sees the whole thread's work at once.

Reverse mode replays primal code at every level (docs/autodiff.md) and user derivatives recompute
(`let Z = eval(x.p)` in the seed MLP's evalBwd); NVRTC cannot merge the repeats, because
cuda_fp16's half arithmetic is inline asm.  Inlined into one body, the repeats become calls of the
same readonly functions with the same argument values, which value numbering turns into reuse.

Policy: readonly functions that contain a loop stay calls (they are what gets reused: a layer's
matrix-vector product); every other call with a body is inlined when its shape allows:
* the callee returns only at the end of its body, has no `discard`, and contains only IR node
  classes of nodes.py;
* out/inout arguments are locals (or fields / constant-free element paths of locals), substituted
  for the parameter; in parameters become fresh locals initialized with the argument;
* the call sits where it is evaluated exactly once, unconditionally, at its statement: not under
  `&&`, `||`, `?:` or a comma, and not in a loop's condition or step.
The callee's statements are spliced into the caller's block (fresh variables throughout), so values
they compute stay in scope for later reuse.  Returns become an assignment to a temporary declared
before them.
"""
from __future__ import annotations

from typing import Optional

from ..ir import nodes as ir
from ..ir import walk as scan
from ..ir.walk import lvalue_root
from .effects import Effects
from .. import types as T

MAX_DEPTH = 24                 # nesting of inlined calls
MAX_NODES = 60000              # stop growing a body past this many IR nodes


class Inliner:
    def __init__(self, effects: Effects):
        self.fx = effects
        self._shape: dict[int, bool] = {}
        self._size: dict[int, int] = {}
        self.budget = MAX_NODES
        self.inlined = 0

    # -------------------------------------------------------------- policy
    def _inlinable_shape(self, fn: ir.Function) -> bool:
        k = id(fn)
        if k not in self._shape:
            ok = fn.body is not None and fn.intrinsic is None and "entry" not in fn.attrs
            if ok:
                stmts = fn.body.stmts
                for n in scan.walk(fn.body):
                    if isinstance(n, ir.Discard) or (type(n).__module__ != ir.__name__
                                                     and not isinstance(n, ir.SwitchCase)):
                        ok = False
                        break
                    if isinstance(n, ir.Return) and not (stmts and n is stmts[-1]):
                        ok = False
                        break
            self._shape[k] = ok
        return self._shape[k]

    def keeps_for_reuse(self, fn: ir.Function) -> bool:
        """A readonly function with a loop stays a call: a reuse candidate."""
        return self.fx.readonly(fn) and any(isinstance(n, ir.Loop) for n in scan.walk(fn.body))

    def wants(self, call: ir.Call, depth: int) -> bool:
        fn = call.func
        if depth >= MAX_DEPTH or not self._inlinable_shape(fn):
            return False
        if self.keeps_for_reuse(fn):
            return False
        for p, a in zip(fn.params, call.args):
            if p.direction != "in" and not _stable_lvalue(a):
                return False
        size = self._size.get(id(fn))
        if size is None:
            size = self._size[id(fn)] = sum(1 for _ in scan.walk(fn.body))
        if size > self.budget:
            return False
        self.budget -= size
        return True

    # -------------------------------------------------------------- statements
    def inline_body(self, fn: ir.Function) -> None:
        fn.body = ir.Block(self._stmts(fn.body.stmts, 0), loc=fn.body.loc)

    def _stmts(self, stmts: list, depth: int) -> list:
        out: list = []
        for s in stmts:
            out.extend(self._stmt(s, depth))
        return out

    def _stmt(self, s, depth: int) -> list:
        if isinstance(s, ir.Block):
            return [ir.Block(self._stmts(s.stmts, depth), loc=s.loc)]
        if isinstance(s, ir.If):
            pre: list = []
            s.cond = self._hoist(s.cond, pre, depth)
            s.then = self._nested(s.then, depth)
            if s.else_ is not None:
                s.else_ = self._nested(s.else_, depth)
            return pre + [s]
        if isinstance(s, ir.Loop):
            s.body = self._nested(s.body, depth)
            return [s]
        if isinstance(s, ir.Switch):
            pre = []
            s.value = self._hoist(s.value, pre, depth)
            for c in s.cases:
                c.body = self._stmts(c.body, depth)
            return pre + [s]
        if isinstance(s, ir.VarDecl):
            pre = []
            if s.init is not None:
                s.init = self._hoist(s.init, pre, depth)
            return pre + [s]
        if isinstance(s, ir.Return):
            pre = []
            if s.value is not None:
                s.value = self._hoist(s.value, pre, depth)
            return pre + [s]
        if isinstance(s, ir.ExprStmt):
            pre = []
            e = s.expr
            if isinstance(e, ir.Call) and e.type == T.VOID and not any(
                    isinstance(n, (ir.Assign, ir.IncDec, ir.Comma, ir.StmtExpr)) for n in scan.walk(e.args)) \
                    and self.wants(e, depth):
                args = [self._hoist_calls(a, pre, depth) for a in e.args]
                return pre + self._expand(e.func, args, None, depth)
            s.expr = self._hoist(e, pre, depth)
            return pre + [s]
        return [s]

    def _nested(self, s, depth: int):
        out = self._stmt(s, depth)
        return out[0] if len(out) == 1 else ir.Block(out, loc=s.loc)

    # -------------------------------------------------------------- expressions
    def _hoist(self, e: ir.Expr, pre: list, depth: int) -> ir.Expr:
        """_hoist_calls on a statement's expression whose evaluation has no effect of its own before
        its calls run (no nested assignment): else e unchanged."""
        inner = e.rhs if isinstance(e, ir.Assign) else e
        if any(isinstance(n, (ir.Assign, ir.IncDec, ir.Comma, ir.StmtExpr)) for n in scan.walk(inner)):
            return e
        if isinstance(e, ir.Assign):
            if any(isinstance(n, ir.Call) for n in scan.walk(e.lhs)):
                return e
            e.rhs = self._hoist_calls(e.rhs, pre, depth)
            return e
        return self._hoist_calls(e, pre, depth)

    def _hoist_calls(self, e: ir.Expr, pre: list, depth: int) -> ir.Expr:
        """e with its unconditionally evaluated inlinable calls replaced by temporaries whose
        computation is appended to `pre` (in evaluation order)."""
        if isinstance(e, ir.Binary) and e.op in ("&&", "||"):
            e.lhs = self._hoist_calls(e.lhs, pre, depth)
            return e                                # the right operand is conditional
        if isinstance(e, ir.Select):
            e.cond = self._hoist_calls(e.cond, pre, depth)
            return e
        if isinstance(e, (ir.Comma, ir.StmtExpr)):
            return e
        if isinstance(e, ir.Call):
            e.args = [self._hoist_calls(a, pre, depth) for a in e.args]
            if e.type != T.VOID and self.wants(e, depth):
                tmp = ir.Var(f"{e.func.slang_name.split('.')[-1].split('::')[-1]}_r"[:40], e.type, loc=e.loc)
                tmp.name = "".join(ch if ch.isalnum() or ch == "_" else "_" for ch in tmp.name)
                pre.append(ir.VarDecl(tmp, None, loc=e.loc))
                pre.extend(self._expand(e.func, e.args, tmp, depth))
                return ir.LocalRef(e.type, tmp, loc=e.loc)
            return e
        for name in scan._CHILD_FIELDS[type(e)]:      # the fields but type, loc, func and var, in order
            v = getattr(e, name)
            if isinstance(v, ir.Expr):
                setattr(e, name, self._hoist_calls(v, pre, depth))
            elif isinstance(v, list):
                setattr(e, name, [self._hoist_calls(x, pre, depth) if isinstance(x, ir.Expr) else x for x in v])
        return e

    def _expand(self, fn: ir.Function, args: list, result: Optional[ir.Var], depth: int) -> list:
        """The statements of fn's body for these arguments (already hoisted), its return value
        assigned to `result`."""
        self.inlined += 1
        subst: dict[int, object] = {}
        out: list = []
        for p, a in zip(fn.params, args):
            if p.direction == "in":
                v = ir.Var(p.name, p.type, loc=p.loc)
                out.append(ir.VarDecl(v, a, loc=a.loc))
                subst[p.uid] = v
            else:
                subst[p.uid] = a                    # a stable lvalue: substituted as is
        body = [_clone(s, subst) for s in fn.body.stmts]
        if body and isinstance(body[-1], ir.Return):
            ret = body.pop()
            if ret.value is not None and result is not None:
                body.append(ir.ExprStmt(ir.Assign(result.type, "=", ir.LocalRef(result.type, result), ret.value,
                                                  loc=ret.loc), loc=ret.loc))
            elif ret.value is not None:
                body.append(ir.ExprStmt(ret.value, loc=ret.loc))
        out.extend(body)
        return self._stmts(out, depth + 1)


def _stable_lvalue(e: ir.Expr) -> bool:
    """An lvalue that names the same storage wherever it is evaluated: a local, or fields / swizzles
    / constant-index elements of one."""
    while True:
        if isinstance(e, ir.LocalRef):
            return True
        if isinstance(e, ir.Field) and not e.via_pointer or isinstance(e, ir.Swizzle):
            e = e.obj
        elif isinstance(e, ir.Index) and isinstance(e.index, ir.Const) and lvalue_root(e) is not None:
            e = e.obj
        else:
            return False


_fresh = scan.fresh_var
_IS_DATACLASS_INSTANCE = scan.IS_DATACLASS_INSTANCE


def _clone(node, subst: Optional[dict]):
    """A deep copy of an IR statement/expression with fresh variables: subst maps a variable uid to
    its replacement Var (filled in on first sight for the callee's own locals) or, for out/inout
    parameters, to the caller's lvalue expression (copied with subst None: variables kept)."""
    if isinstance(node, list):
        return [_clone(x, subst) for x in node]
    if isinstance(node, ir.LocalRef):
        if subst is None:                           # a caller's lvalue: its variables stay
            return ir.LocalRef(node.type, node.var, loc=node.loc)
        r = subst.get(node.var.uid)
        if isinstance(r, ir.Expr):
            return _clone(r, None)
        if r is None:
            r = subst[node.var.uid] = _fresh(node.var)
        return ir.LocalRef(node.type, r, loc=node.loc)
    if isinstance(node, ir.VarDecl) and subst is not None:
        v = subst.get(node.var.uid)
        if v is None:
            v = subst[node.var.uid] = _fresh(node.var)
        return ir.VarDecl(v, _clone(node.init, subst), loc=node.loc)
    if not _IS_DATACLASS_INSTANCE[type(node)]:     # not a node (a class object is not one either)
        return node
    return scan.rebuild(node, lambda v: _clone(v, subst))


def clone_body(fn: ir.Function) -> ir.Block:
    """A deep copy of fn's body (its own locals fresh, its parameters the same)."""
    return _clone(fn.body, {p.uid: p for p in fn.params})


def inline_entry(fn: ir.Function, effects: Effects) -> int:
    """Inline fn's calls into its body (in place); returns how many calls were inlined."""
    inl = Inliner(effects)
    inl.inline_body(fn)
    return inl.inlined
