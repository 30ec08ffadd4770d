"""What IR code does besides computing values: which locals it writes, whether it writes memory, and
which functions are *readonly* (read memory at most: a call's value depends only on its arguments
and the memory it reads, so two calls with equal arguments and no memory write between them are
equal).  Shared by the inliner (passes/inline_calls.py) and common-subexpression reuse
(passes/value_numbering.py); nothing here changes the IR."""
from __future__ import annotations


from ..ir import nodes as ir
from ..ir import walk as scan
from ..ir.walk import lvalue_root
from .. import types as T

# Intrinsics that act on memory, on other lanes or on the thread's progress: never "pure", whatever
# their result type.  (Matched on the spelling; the core library's pure math has none of these.)
_EFFECT_WORDS = ("Interlocked", "atomic", "Atomic", "Wave", "Quad", "Group", "Barrier", "barrier",
                 "fence", "Fence", "printf", "clock", "Clock", "syncwarp", "Memory", "rand", "discard",
                 "Store", "store", "Append", "Consume", "IncrementCounter", "DecrementCounter")


def effect_intrinsic(e: ir.Intrinsic) -> bool:
    """An intrinsic that must run where it is written (and may write memory)."""
    return (e.type == T.VOID or bool(e.out_params)
            or any(w in e.name for w in _EFFECT_WORDS))


class Effects:
    """Per-function summaries (memoized) and per-expression effect scans.

    `deferred`: ids of gradient-add intrinsics whose adds a coarsened kernel defers to its end
    (emit/cuda.py): they write no memory a later read of the same dispatch sees."""

    def __init__(self, deferred: frozenset = frozenset()):
        self.deferred = deferred
        self._readonly: dict[int, bool] = {}

    def readonly(self, fn: ir.Function) -> bool:
        """Calls of fn compute a value from their arguments and the memory they read, nothing else:
        in parameters only, no memory writes, no effectful intrinsics, only readonly callees."""
        k = id(fn)
        if k in self._readonly:
            return self._readonly[k]
        self._readonly[k] = False                   # recursion: not readonly
        ok = (fn.body is not None and fn.intrinsic is None and fn.ret != T.VOID
              and all(p.direction == "in" for p in fn.params)
              and not any(isinstance(n, ir.Discard) for n in scan.walk(fn.body))
              and not self.expr_effects(fn.body, set()))
        self._readonly[k] = ok
        return ok

    # -------------------------------------------------------------- scans
    def expr_effects(self, e, locals_out: set) -> bool:
        """Adds the uids of locals `e` writes to locals_out; True when it may write memory (or do
        anything else that must stay in place)."""
        mem = False
        for n in scan.walk(e):
            if isinstance(n, (ir.Assign, ir.IncDec)):
                root = lvalue_root(n.lhs if isinstance(n, ir.Assign) else n.operand)
                if root is None:
                    mem = True
                else:
                    locals_out.add(root.uid)
            elif isinstance(n, ir.Call):
                if not self.readonly(n.func):
                    mem = True
                    for p, a in zip(n.func.params, n.args):
                        if p.direction != "in":
                            root = lvalue_root(a)
                            if root is None:
                                mem = True
                            else:
                                locals_out.add(root.uid)
            elif isinstance(n, ir.Intrinsic):
                if id(n) in self.deferred:
                    continue
                if effect_intrinsic(n):
                    mem = True
                for i in n.out_params:
                    root = lvalue_root(n.args[i])
                    if root is not None:
                        locals_out.add(root.uid)
            elif isinstance(n, ir.MethodCall):
                mem = True
                for a in [n.obj, *n.args]:           # the object, and any argument it may write back
                    root = lvalue_root(a)
                    if root is not None:
                        locals_out.add(root.uid)
            elif isinstance(n, (ir.AddressOf, ir.StmtExpr, ir.Discard)) or not _known(n):
                mem = True
        return mem


def _known(n) -> bool:
    """Node classes of nodes.py (the checker's helper expressions are not summarized: effectful)."""
    return type(n).__module__ == ir.__name__ or isinstance(n, ir.SwitchCase)
