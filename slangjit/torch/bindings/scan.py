"""What loadModule reads from a module's syntax tree: the bound kernels, their parameters (as written),
their attributes, and which tensor parameters a kernel may write (stride-0 tensors are refused there).

Nothing here checks types: the compiler does that when the generated entry points are compiled."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from ...compiler.parse import ast
from ...compiler.source import CompileError, Diagnostic

BIND_ATTRS = {"PyBindCUDA", "AutoPyBindCUDA", "PyBindCPU", "AutoPyBind"}
KERNEL_ATTRS = {"CudaKernel", "CUDAKernel"}
FWD_ATTRS = {"PyBindCUDAFwdDiff"}
BWD_ATTRS = {"PyBindCUDABwdDiff"}
DIFF_ATTRS = {"Differentiable", "BackwardDifferentiable"}
TORCH_ENTRY_ATTRS = {"TorchEntryPoint"}

# methods of TensorView / DiffTensorView* that only read the view (anything else may write)
READ_METHODS = {"load", "loadOnce", "loadFixed", "loadUniform", "loadUniformOnce", "size", "dims", "stride",
                "numel", "shape"}


@dataclass
class ParamInfo:
    name: str
    type_text: str            # the parameter type as Slang text (re-printed from the syntax tree)
    written: bool             # the kernel may write through it (stores, atomics, passing it on)


@dataclass
class KernelInfo:
    name: str
    params: list
    differentiable: bool
    bind_fwd: bool
    bind_bwd: bool
    attrs: list = field(default_factory=list)


@dataclass
class ScanResult:
    kernels: list
    torch_entries: list        # names of [TorchEntryPoint] functions (not supported)


def type_text(e) -> str:
    if isinstance(e, ast.Name):
        return e.name
    if isinstance(e, ast.GenericApp):
        return f"{type_text(e.base)}<{', '.join(type_text(a) for a in e.args)}>"
    if isinstance(e, ast.Member):
        return f"{type_text(e.base)}{e.op}{e.name}"
    if isinstance(e, ast.IntLit):
        return f"{e.value}{e.suffix}"
    if isinstance(e, ast.BoolLit):
        return "true" if e.value else "false"
    if isinstance(e, ast.ArrayTypeExpr):
        return f"{type_text(e.element)}[{type_text(e.size) if e.size is not None else ''}]"
    if isinstance(e, ast.PointerTypeExpr):
        return f"{type_text(e.element)}*"
    if isinstance(e, ast.Unary) and e.op == "-":
        return f"-{type_text(e.operand)}"
    raise CompileError(Diagnostic("E5090", "this parameter type cannot be bound for Python", e.loc))


def _children(node):
    for f in dataclasses.fields(node):
        if f.name == "loc":
            continue
        v = getattr(node, f.name)
        if isinstance(v, ast.Node):
            yield v
        elif isinstance(v, list):
            for x in v:
                if isinstance(x, ast.Node):
                    yield x


def _root_name(e):
    while True:
        if isinstance(e, ast.Name):
            return e.name
        if isinstance(e, (ast.Member, ast.Index)):
            e = e.base
        else:
            return None


def written_params(body, names: set) -> set:
    """Parameters the body may write: assigned through (`p[i] = v`, `p.primal[i] += v`), called with a
    method other than a read, or passed to another function (conservatively)."""
    out: set = set()
    stack = [body] if body is not None else []
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Assign) or (isinstance(n, (ast.Unary, ast.Postfix)) and n.op in ("++", "--")):
            r = _root_name(n.lhs if isinstance(n, ast.Assign) else n.operand)
            if r in names:
                out.add(r)
        elif isinstance(n, ast.Call):
            c = n.callee
            if isinstance(c, ast.Member) and c.name not in READ_METHODS:
                r = _root_name(c.base)
                if r in names:
                    out.add(r)
            for a in n.args:
                r = _root_name(a)
                if r in names and not (isinstance(a, ast.Index) or isinstance(a, ast.Member)):
                    out.add(r)
        stack.extend(_children(n))
    return out


def _walk_decls(decls):
    for d in decls:
        if isinstance(d, ast.NamespaceDecl):
            yield from _walk_decls(d.members)
        else:
            yield d


def scan_module(mod: ast.Module) -> ScanResult:
    kernels, entries = [], []
    for d in _walk_decls(mod.decls):
        if not isinstance(d, ast.FuncDecl):
            continue
        names = {a.name for a in d.attrs}
        if names & TORCH_ENTRY_ATTRS:
            entries.append(d.name)
            continue
        if not names & BIND_ATTRS:
            continue
        if d.generic_params:
            raise CompileError(Diagnostic("E5091", f"the bound kernel '{d.name}' is generic; slang-torch binds "
                                          "only concrete kernels", d.loc))
        pnames = {p.name for p in d.params}
        wr = written_params(d.body, pnames)
        params = []
        for p in d.params:
            if p.direction not in ("in",):
                raise CompileError(Diagnostic("E5092", f"parameter '{p.name}' of the bound kernel '{d.name}' is "
                                              f"'{p.direction}': bound kernels take inputs only (write through "
                                              "a TensorView instead)", p.loc))
            params.append(ParamInfo(p.name, type_text(p.type), p.name in wr))
        diff = bool(names & DIFF_ATTRS)
        kernels.append(KernelInfo(d.name, params, diff, diff, diff, sorted(names)))
    return ScanResult(kernels, entries)
