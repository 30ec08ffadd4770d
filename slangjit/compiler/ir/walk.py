"""Walking IR: the one definition of a node's children, of an lvalue's root variable and of a
pure expression.  Every stage that looks inside IR (autodiff, the passes, the emitters) uses these.

A node's children are the values of its dataclass fields other than `type`, `loc`, `func` and
`var` (a callee or a variable is referenced, not owned) that are nodes or lists of nodes.
"""
from __future__ import annotations

import dataclasses
from typing import Iterator, Optional

from .. import types as T
from . import nodes as ir

_NOT_CHILDREN = ("type", "loc", "func", "var")


class _ChildFields(dict):
    """Node class -> the names of its fields that may hold child nodes (None: not a node class); filled on
    first sight of a class.  A dict subclass, so the walk's lookup is one subscript, no call."""

    def __missing__(self, cls):
        f = (tuple(x.name for x in dataclasses.fields(cls) if x.name not in _NOT_CHILDREN)
             if dataclasses.is_dataclass(cls) else None)
        self[cls] = f
        return f


_CHILD_FIELDS = _ChildFields()


def _child_fields(cls) -> Optional[tuple]:
    """The fields of a node class that may hold child nodes (None: not a node class)."""
    return _CHILD_FIELDS[cls]


def walk(node) -> Iterator:
    """Every IR node (expressions, statements, switch cases) below `node`, `node` included (pre-order, children
    in reverse field order: the order every pass has seen)."""
    fields = _CHILD_FIELDS
    stack = [node]
    pop, push = stack.pop, stack.append
    while stack:
        n = pop()
        names = fields[type(n)]
        if names is None:
            if isinstance(n, list):
                stack.extend(n)
            continue
        yield n
        for name in names:
            v = getattr(n, name)
            if fields[type(v)] is not None or isinstance(v, list):
                push(v)


def expr_children(e: ir.Expr) -> list:
    """The operand expressions of expression `e`, in field order."""
    out = []
    expr = ir.Expr
    for name in _CHILD_FIELDS[type(e)] or ():
        v = getattr(e, name)
        if isinstance(v, list):
            out.extend([x for x in v if isinstance(x, expr)])
        elif isinstance(v, expr):
            out.append(v)
    return out


def local_uids(node) -> set:
    """The uid of every local variable named (read or written) anywhere below `node`."""
    return {n.var.uid for n in walk(node) if isinstance(n, ir.LocalRef)}


def value_type(e: ir.Expr) -> T.Type:
    """e's type; a local's declared type for a LocalRef (reverse mode sizes its stacks after making
    references to them)."""
    return e.var.type if isinstance(e, ir.LocalRef) else e.type


def lvalue_root(e: ir.Expr) -> Optional[ir.Var]:
    """The local variable an lvalue designates (part of), or None when it designates memory
    (a buffer element, a pointer's target, a global)."""
    while True:
        if isinstance(e, ir.LocalRef):
            return e.var
        if isinstance(e, ir.Field) and not e.via_pointer:
            e = e.obj
        elif isinstance(e, ir.Swizzle):
            e = e.obj
        elif isinstance(e, ir.Index) and isinstance(value_type(e.obj), (T.ArrayType, T.VectorType, T.MatrixType)):
            e = e.obj
        else:
            return None


def local_written(lv: ir.Expr) -> Optional[ir.Var]:
    """The local that a write to lvalue `lv` changes (part of), looking through fields, swizzles, element
    indices and conversions; None when the write goes to memory (a pointer's target, a buffer element)."""
    while True:
        if isinstance(lv, (ir.Field, ir.Swizzle)) and not getattr(lv, "via_pointer", False):
            lv = lv.obj
        elif isinstance(lv, ir.Index) and not isinstance(value_type(lv.obj), (T.PointerType, T.BufferType)):
            lv = lv.obj
        elif isinstance(lv, ir.Convert):
            lv = lv.operand
        else:
            break
    return lv.var if isinstance(lv, ir.LocalRef) else None


def write_targets(n) -> list:
    """The lvalues node `n` itself writes: an assignment's or increment's target, a call's out / inout
    arguments, an intrinsic's out parameters (nothing for other nodes)."""
    if isinstance(n, ir.Assign):
        return [n.lhs]
    if isinstance(n, ir.IncDec):
        return [n.operand]
    if isinstance(n, ir.Call):
        return [a for p, a in zip(n.func.params, n.args) if p.direction != "in"]
    if isinstance(n, ir.Intrinsic):
        return [n.args[i] for i in n.out_params if i < len(n.args)]
    return []


def is_pure(e: ir.Expr) -> bool:
    """No effect: no assignment, call, out-argument, or statement inside."""
    if isinstance(e, (ir.Const, ir.LocalRef, ir.GlobalRef, ir.SystemValue)):
        return True
    if isinstance(e, (ir.Assign, ir.IncDec, ir.Call, ir.MethodCall, ir.StmtExpr, ir.Comma, ir.OutConvert)):
        return False
    if isinstance(e, ir.Intrinsic):
        return not e.out_params and e.name != "sj::printf" and all(is_pure(a) for a in e.args)
    return all(is_pure(c) for c in expr_children(e))


def fresh_var(v: ir.Var) -> ir.Var:
    """A new variable (its own uid) with v's name, type, direction and every attribute set after construction."""
    w = ir.Var(v.name, v.type, v.direction, v.loc)
    for k, x in vars(v).items():
        if k not in ("uid", "name", "type", "direction", "loc"):
            setattr(w, k, x)
    return w


def rebuild(node, child, func=None, override: Optional[dict] = None):
    """A copy of the dataclass `node` whose fields are `child(value)`, except `type` and `loc` (kept), `func`
    (kept, or `func(value)`), dicts (copied shallowly) and the fields named in `override`; attributes set
    after construction (type_args, ...) are carried over.  The one field-by-field copy the IR clones share."""
    kw = {}
    order, names = _FIELD_NAMES[type(node)]
    for name in order:
        v = getattr(node, name)
        if override is not None and name in override:
            kw[name] = override[name]
        elif name == "type" or name == "loc":
            kw[name] = v
        elif name == "func":
            kw[name] = v if func is None else func(v)
        elif isinstance(v, dict):
            kw[name] = dict(v)
        else:
            kw[name] = child(v)
    copy = type(node)(**kw)
    for k, v in vars(node).items():
        if k not in names:
            setattr(copy, k, v)
    return copy


class _FieldNames(dict):
    """Dataclass -> (its field names in declaration order, the same as a set), computed on first sight of a
    class (`dataclasses.fields` per copied node was most of a clone's time)."""

    def __missing__(self, cls):
        names = tuple(x.name for x in dataclasses.fields(cls))
        f = self[cls] = (names, frozenset(names))
        return f


_FIELD_NAMES = _FieldNames()


class _IsNode(dict):
    """Class -> whether its instances are dataclass nodes (`dataclasses.is_dataclass` of an instance, as a
    subscript)."""

    def __missing__(self, cls):
        f = self[cls] = dataclasses.is_dataclass(cls) and not issubclass(cls, type)
        return f


IS_DATACLASS_INSTANCE = _IsNode()
