"""The C-family emitter: IR -> C++ source (CUDA differences go in a small per-target table).

Output shape: prelude, struct definitions in dependency order, the globals block struct, static
globals, function prototypes, function bodies, then one `extern "C"` launcher per entry point
following the ABI in reflection.py.
"""
from __future__ import annotations

import os
from typing import Optional

from ..ir import nodes as ir
from ..passes.red_slots import counted_loop
from .. import types as T

_PRELUDE_PATH = os.path.join(os.path.dirname(__file__), "prelude.h")
_prelude_cache: Optional[str] = None


def c_string(s: str) -> str:
    """A C string literal of s (UTF-8): printable ASCII as is, everything else as octal escapes (an octal
    escape takes at most three digits, so a following digit is never swallowed)."""
    out = []
    for b in s.encode("utf-8"):
        c = chr(b)
        if c in "\\\"":
            out.append("\\" + c)
        elif 32 <= b < 127:
            out.append(c)
        else:
            out.append(f"\\{b:03o}")
    return '"' + "".join(out) + '"'


def prelude_text() -> str:
    """prelude.h with its `#include "prelude/..."` sections pasted in (generated code must be one
    self-contained text: it is hashed for the caches and handed to NVRTC as is)."""
    global _prelude_cache
    if _prelude_cache is None:
        base = os.path.dirname(_PRELUDE_PATH)
        out = []
        with open(_PRELUDE_PATH, encoding="utf-8") as f:
            for line in f:
                m = line.startswith('#include "prelude/')
                if m:
                    name = line.split('"')[1]
                    with open(os.path.join(base, name), encoding="utf-8") as part:
                        out.append(part.read())
                else:
                    out.append(line)
        _prelude_cache = "".join(out)
    return _prelude_cache


CPP_SCALARS = {"void": "void", "bool": "bool", "int8_t": "int8_t", "int16_t": "int16_t", "int": "int32_t",
               "int64_t": "int64_t", "uint8_t": "uint8_t", "uint16_t": "uint16_t", "uint": "uint32_t",
               "uint64_t": "uint64_t", "half": "sj::half", "float": "float", "double": "double"}


class EmitError(Exception):
    pass


class CppEmitter:
    def __init__(self, target: str = "cpp", checked: bool = False):
        self.target = target
        # PipelineOptions.checked: every buffer / local-array / vector / pointer access is checked and a
        # failure is recorded in the dispatch's error record (prelude 13_checks.h) at a site of
        # `self.sites` ("file:line: what"), which the program's reflection carries (error_sites).
        self.checked = checked
        self.sites: list[str] = []
        self.counter_ranges: dict[int, tuple[int, int]] = {}   # Var uid -> (lo, hi) of an enclosing counted loop
        self.trusted_entry_pointers = False    # PipelineOptions.trusted_entry_pointers (see null_check)
        self.entry_ids: set = set()            # id() of the program's entry functions
        self.site_ids: dict[str, int] = {}
        self.cur_loc = None
        self.cur_fn: Optional[ir.Function] = None
        # Depth-counted recursion guard (CUDA, emit/program.py assemble): ids of the functions on a call
        # cycle, which take a trailing `int sj_depth`, and the deepest level they may run at.
        self.depth_fns: set = set()
        self.depth_limit = 0
        self.struct_names: dict[int, str] = {}
        self.aux_structs: dict = {}          # tuple / optional types -> C name
        self.lines: list[str] = []
        self.struct_out: list[str] = []
        self.emitted_structs: set = set()
        self.loop_labels: list = []
        self.label_uid = 0

    # ------------------------------------------------------------------ types

    def ctype(self, t: T.Type) -> str:
        if isinstance(t, T.ScalarType):
            return CPP_SCALARS[t.name]
        if isinstance(t, T.EnumType):
            return CPP_SCALARS[t.underlying.name]
        if isinstance(t, T.VectorType):
            return f"sj::vec<{self.ctype(t.elem)}, {t.n}>"
        if isinstance(t, T.MatrixType):
            return f"sj::mat<{self.ctype(t.elem)}, {t.rows}, {t.cols}>"
        if isinstance(t, T.ArrayType):
            return f"sj::array<{self.ctype(t.elem)}, {t.n or 1}>"
        if isinstance(t, T.PointerType):
            return f"{self.ctype(t.elem)}*" if t.elem != T.VOID else "void*"
        if isinstance(t, T.AtomicType):
            return f"sj::Atomic<{self.ctype(t.elem)}>"
        if isinstance(t, T.BufferType):
            if t.byte_address:
                return "sj::RWByteAddressBuffer" if t.writable else "sj::ByteAddressBuffer"
            kind = "RWStructuredBuffer" if t.writable else "StructuredBuffer"
            return f"sj::{kind}<{self.ctype(t.elem)}>"
        if isinstance(t, T.StructType):
            self.ensure_struct(t)
            return t.info.c_name
        if isinstance(t, (T.TupleType, T.OptionalType, T.PairType)):
            return self.ensure_aux(t)
        if isinstance(t, T.StringType):
            return "const char*"
        if isinstance(t, T.InterfaceType) and getattr(t.info, "dyn_words", None):
            return f"sj::dyn<{t.info.dyn_words}>"      # a dynamic value (check/dynamic.py)
        raise EmitError(f"cannot emit type {t}")

    def ensure_struct(self, t: T.StructType):
        if id(t) in self.emitted_structs:
            return
        self.emitted_structs.add(id(t))
        inst = t.info
        # Field types first (dependency order).
        field_types = [self.ctype(ft) for _, ft, _, _ in inst.fields]
        defaults = getattr(inst, "field_defaults", None) or [None] * len(inst.fields)
        body = [f"struct {inst.c_name} {{"]
        for (name, ft, _, _), cty, dflt in zip(inst.fields, field_types, defaults):
            init = self.expr(dflt) if dflt is not None else "{}"
            body.append(f"    {cty} {name} = {init};")
        body.append("};")
        self.struct_out.append("\n".join(body))

    def ensure_aux(self, t) -> str:
        key = t
        if key in self.aux_structs:
            return self.aux_structs[key]
        name = f"sj_aux{len(self.aux_structs)}"
        self.aux_structs[key] = name
        if isinstance(t, T.TupleType):
            fields = [f"    {self.ctype(e)} _{i} = {{}};" for i, e in enumerate(t.elems)]
        elif isinstance(t, T.PairType):
            fields = [f"    {self.ctype(t.primal)} p = {{}};", f"    {self.ctype(t.diff)} d = {{}};"]
        else:
            fields = [f"    {self.ctype(t.elem)} value = {{}};", "    bool hasValue = false;"]
        self.struct_out.append(f"struct {name} {{\n" + "\n".join(fields) + "\n};")
        return name

    # ------------------------------------------------------------------ expressions

    def var_name(self, v: ir.Var) -> str:
        return f"{v.name}_{v.uid}" if v.name != "this" else f"self_{v.uid}"

    def const(self, t: T.Type, v) -> str:
        if isinstance(t, T.EnumType):
            return f"({self.ctype(t)}){int(v)}"
        if isinstance(t, T.StringType):
            return c_string(str(v))
        if isinstance(t, T.PointerType):
            return "nullptr"
        if not isinstance(t, T.ScalarType):
            raise EmitError(f"constant of type {t}")
        if t.kind == "bool":
            return "true" if v else "false"
        if t.kind == "int":
            v = int(v)
            if t.bits == 64:
                return f"INT64_C({v})" if v != -(1 << 63) else "(INT64_C(-9223372036854775807)-1)"
            if t.bits == 32:
                return str(v) if v != -(1 << 31) else "(-2147483647-1)"
            return f"(({self.ctype(t)}){v})"
        if t.kind == "uint":
            v = int(v)
            if t.bits == 64:
                return f"UINT64_C({v})"
            if t.bits == 32:
                return f"{v}u"
            return f"(({self.ctype(t)}){v}u)"
        v = float(v)
        if v != v:
            lit = "__builtin_nan(\"\")"
        elif v in (float("inf"), float("-inf")):
            lit = "__builtin_inf()" if v > 0 else "(-__builtin_inf())"
        else:
            lit = float.hex(v)
        if t.bits == 32:
            return f"{lit}f" if v == v and v not in (float("inf"), float("-inf")) else f"((float){lit})"
        if t.bits == 16:
            return f"((sj::half){lit})"
        return lit

    def args_str(self, args) -> str:
        return ", ".join(self.expr(a) for a in args)

    def expr(self, e: ir.Expr) -> str:
        m = getattr(self, "x_" + type(e).__name__, None)
        if m is None:
            raise EmitError(f"cannot emit {type(e).__name__}")
        return m(e)

    def x_Const(self, e):
        return self.const(e.type, e.value)

    def x_LocalRef(self, e):
        return self.var_name(e.var)

    def x_GlobalRef(self, e):
        if e.var.kind == "uniform":
            return f"sj_g->{e.var.name}"
        return e.var.name

    def with_out_temps(self, args, make_call) -> str:
        """Calls with out-arguments of a different type go through temporaries."""
        if not any(isinstance(a, ir.OutConvert) for a in args):
            call = make_call([self.expr(a) for a in args])
            return call[8:] if call.startswith("sj_void:") else call
        pre, post, parts = [], [], []
        for i, a in enumerate(args):
            if isinstance(a, ir.OutConvert):
                tmp = f"sj_tmp{i}"
                ct = self.ctype(a.type)
                pre.append(f"{ct} {tmp} = {self.convert_str(self.expr(a.lvalue), a.lvalue.type, a.type)};")
                post.append(self.assign_str(a.lvalue, self.convert_str(tmp, a.type, a.lvalue.type)) + ";")
                parts.append(tmp)
            else:
                parts.append(self.expr(a))
        call = make_call(parts)
        return ("[&]() { " + " ".join(pre) + f" auto&& sj_r = ({call}); " + " ".join(post) +
                " return sj_r; }()") if not call.startswith("sj_void:") else \
            ("[&]() { " + " ".join(pre) + f" {call[8:]}; " + " ".join(post) + " }()")

    def depth_arg(self, callee: ir.Function) -> list[str]:
        """The hidden depth argument of a call to a depth-guarded function: one level deeper than a guarded
        caller (conservative across nested cycles), 0 from any other caller."""
        if id(callee) not in self.depth_fns:
            return []
        return ["sj_depth + 1" if self.cur_fn is not None and id(self.cur_fn) in self.depth_fns else "0"]

    def x_Call(self, e):
        void = e.type == T.VOID
        extra = self.depth_arg(e.func)
        return self.with_out_temps(e.args, lambda parts: ("sj_void:" if void else "") +
                                   f"{e.func.name}({', '.join(list(parts) + extra)})")

    def x_Intrinsic(self, e):
        if e.name == "sj::fail":      # a recorded failure (autodiff/reverse.py: a [MaxIters] overrun)
            code, what = e.args
            return f"sj::fail({int(code.value)}u, {self.site(e.loc, str(what.value))}u)"
        void = e.type == T.VOID
        name = e.name
        if "$T" in name:
            for i, ta in enumerate(getattr(e, "type_args", [])):
                if isinstance(ta, T.Type):
                    name = name.replace(f"$T{i}", self.ctype(ta))
        return self.with_out_temps(e.args, lambda parts: ("sj_void:" if void else "") + f"{name}({', '.join(parts)})")

    def x_MethodCall(self, e):
        name = e.name
        if "@T0" in name:
            ty = e.type if "LoadT" in name else e.args[1].type
            name = name.replace("@T0", self.ctype(ty))
        obj = self.expr(e.obj)
        sep = "->" if e.via_pointer and not self.null_checks() else "."
        if e.via_pointer and self.null_checks():
            obj = f"sj::deref({obj}, {self.site(e.loc, 'null pointer dereference')}u)"
        void = e.type == T.VOID
        args = e.args
        size = self.byte_access_size(e, name)
        if size is not None and args:
            site = self.site(e.loc, f"byte-address buffer access out of range ({e.obj.type})")
            first = f"sj::bytes_chk({obj}, {self.expr(args[0])}, {size}, {site}u)"
            return self.with_out_temps(args[1:], lambda parts: ("sj_void:" if void else "") +
                                       f"({obj}){sep}{name}({', '.join([first] + list(parts))})")
        return self.with_out_temps(args, lambda parts: ("sj_void:" if void else "") + f"({obj}){sep}{name}({', '.join(parts)})")

    def byte_access_size(self, e, name: str) -> Optional[str]:
        """Checked mode: the bytes a byte-address buffer Load*/Store* touches (None: not checked here)."""
        if not self.checked or not isinstance(e.obj.type, T.BufferType) or not e.obj.type.byte_address:
            return None
        base = name.split("<")[0]
        sizes = {"Load": "4", "Load2": "8", "Load3": "12", "Load4": "16",
                 "Store": "4", "Store2": "8", "Store3": "12", "Store4": "16"}
        if base in sizes:
            return sizes[base]
        if base in ("LoadT", "StoreT") and "<" in name:
            return f"sizeof({name[name.index('<') + 1:name.rindex('>')]})"
        return None

    def x_Unary(self, e):
        r = f"({e.op}{self.expr(e.operand)})"
        return self.narrow(e.type, r)

    def narrow(self, t, s: str) -> str:
        """C++ promotes 8/16-bit integers to int; Slang keeps the type."""
        if isinstance(t, T.ScalarType) and t.kind in ("int", "uint") and t.bits < 32:
            return f"(({self.ctype(t)}){s})"
        return s

    def x_Binary(self, e):
        a, b = self.expr(e.lhs), self.expr(e.rhs)
        op = e.op
        s = T.scalar_of(e.lhs.type)
        if not isinstance(e.lhs.type, (T.ScalarType, T.EnumType)):
            s = None      # the prelude's vector/matrix operators are already safe
        if op in ("/", "%") and s is not None and s.kind in ("int", "uint"):
            return self.narrow(e.type, f"sj::{'div' if op == '/' else 'mod'}({a}, {b})")
        if op == "%" and s is not None and s.kind == "float":
            return f"sj::fmod({a}, {b})"
        if op in ("<<", ">>") and s is not None:
            return self.narrow(e.type, f"sj::{'shl' if op == '<<' else 'shr'}({a}, {b})")
        if isinstance(e.lhs.type, T.PointerType) and op in ("+", "-") and not isinstance(e.rhs.type, T.PointerType):
            return f"({a} {op} {b})"
        return self.narrow(e.type, f"({a} {op} {b})")

    def assign_str(self, lhs: ir.Expr, rhs: str, op: str = "=") -> str:
        if isinstance(lhs, ir.OutConvert):
            # An out-argument of another type written directly (a derivative rule storing an intrinsic's
            # outputs): convert the value to the argument's own type.
            if op != "=":
                rhs = f"({self.x_OutConvert(lhs)} {op[:-1]} {rhs})"
            return self.assign_str(lhs.lvalue, self.convert_str(rhs, lhs.type, lhs.lvalue.type))
        if isinstance(lhs, ir.Swizzle) and len(lhs.indices) > 1:
            idx = ",".join(map(str, lhs.indices))
            return f"(sj::swizzle_ref<{idx}>({self.expr(lhs.obj)}) {op} {rhs})"
        return f"({self.expr(lhs)} {op} {rhs})"

    def x_OutConvert(self, e):
        """Read as a value (a derivative rule reading an inout argument): the argument converted to the parameter's type."""
        return self.convert_str(self.expr(e.lvalue), e.lvalue.type, e.type)

    def x_Assign(self, e):
        rhs = self.expr(e.rhs)
        if e.op == "=":
            return self.assign_str(e.lhs, rhs)
        op = e.op[:-1]
        s = T.scalar_of(e.lhs.type)
        if not isinstance(e.lhs.type, (T.ScalarType, T.EnumType)):
            s = None
        fn = None
        if op in ("/", "%") and s is not None and s.kind in ("int", "uint"):
            fn = "sj::div" if op == "/" else "sj::mod"
        elif op == "%" and s is not None and s.kind == "float":
            fn = "sj::fmod"
        elif op in ("<<", ">>") and s is not None:
            fn = "sj::shl" if op == "<<" else "sj::shr"
        if fn is not None:
            lhs = self.expr(e.lhs)
            return self.assign_str(e.lhs, f"{fn}({lhs}, {rhs})")
        if isinstance(e.lhs.type, T.ScalarType) and e.lhs.type.bits < 32 and e.lhs.type.kind in ("int", "uint"):
            lhs = self.expr(e.lhs)
            return self.assign_str(e.lhs, self.narrow(e.lhs.type, f"({lhs} {op} {rhs})"))
        return self.assign_str(e.lhs, rhs, e.op)

    def x_IncDec(self, e):
        x = self.expr(e.operand)
        return f"({e.op}{x})" if e.prefix else f"({x}{e.op})"

    def convert_str(self, s: str, src: T.Type, dst: T.Type) -> str:
        if src == dst:
            return s
        if isinstance(dst, T.BufferType):
            return f"{self.ctype(dst)}{{{s}.data, {s}.count}}"
        if isinstance(dst, (T.ScalarType, T.EnumType, T.PointerType)):
            if isinstance(dst, T.ScalarType) and dst.kind == "bool" and isinstance(src, T.ScalarType) and src.kind == "float":
                return f"({s} != 0)"
            return f"(({self.ctype(dst)})({s}))"
        return f"sj::convert<{self.ctype(dst)}>({s})"

    def x_Convert(self, e):
        return self.convert_str(self.expr(e.operand), e.operand.type, e.type)

    def x_Construct(self, e):
        t = e.type
        ct = self.ctype(t)
        if not e.args:
            return f"(({ct})nullptr)" if isinstance(t, T.PointerType) else f"{ct}{{}}"   # `float*{}` is no C++
        if isinstance(t, T.VectorType):
            if e.splat:
                return f"sj::vsplat<{self.ctype(t.elem)}, {t.n}>({self.expr(e.args[0])})"
            return f"sj::vcat<{self.ctype(t.elem)}, {t.n}>({self.args_str(e.args)})"
        if isinstance(t, T.MatrixType):
            if e.splat:
                return f"sj::msplat<{self.ctype(t.elem)}, {t.rows}, {t.cols}>({self.expr(e.args[0])})"
            return f"sj::mcat<{self.ctype(t.elem)}, {t.rows}, {t.cols}>({self.args_str(e.args)})"
        if isinstance(t, T.ArrayType):
            return f"{ct}{{{{{self.args_str(e.args)}}}}}"
        if isinstance(t, T.OptionalType):
            return f"{ct}{{{self.expr(e.args[0])}, true}}"
        if isinstance(t, T.PairType) and len(e.args) == 1:
            return f"{ct}{{{self.expr(e.args[0])}, {{}}}}"
        if isinstance(t, (T.ScalarType, T.EnumType)):
            return f"(({ct})({self.expr(e.args[0])}))"
        return f"{ct}{{{self.args_str(e.args)}}}"

    def x_Field(self, e):
        if e.via_pointer and not self.null_check(e.obj):
            return f"{self.expr(e.obj)}->{e.name}"
        if e.via_pointer:
            return f"sj::deref({self.expr(e.obj)}, {self.site(e.loc, 'null pointer dereference')}u).{e.name}"
        return f"{self.expr(e.obj)}.{e.name}"

    def x_Swizzle(self, e):
        if len(e.indices) == 1:
            if isinstance(e.obj.type, T.ScalarType):
                return self.expr(e.obj)
            return f"{self.expr(e.obj)}[{e.indices[0]}]"
        return f"sj::swizzle<{','.join(map(str, e.indices))}>({self.expr(e.obj)})"

    # ------------------------------------------------------------------ checked accesses

    def site(self, loc, what: str) -> int:
        """The index of a failure site (Slang file:line and what failed) in the program's site table."""
        if loc is None or not getattr(loc, "line", 0):
            loc = self.cur_loc
        if (loc is None or not getattr(loc, "line", 0)) and self.cur_fn is not None:
            loc = self.cur_fn.loc
        where = f"{loc.file.path if loc is not None and loc.file else '<unknown>'}:{loc.line if loc is not None else 0}"
        text = f"{where}: {what}"
        i = self.site_ids.get(text)
        if i is None:
            i = self.site_ids[text] = len(self.sites)
            self.sites.append(text)
        return i

    def x_Index(self, e):
        obj, idx, ot = self.expr(e.obj), self.expr(e.index), e.obj.type
        if isinstance(e.obj, ir.LocalRef):
            ot = e.obj.var.type          # (a reverse-mode stack's reference predates its array type)
        if isinstance(ot, (T.ArrayType, T.VectorType, T.MatrixType)):
            n = ot.n if isinstance(ot, (T.ArrayType, T.VectorType)) else ot.rows
            if isinstance(e.index, ir.Const) and isinstance(e.index.value, int) and 0 <= e.index.value < (n or 1):
                return f"{obj}[{idx}]"          # a constant index in range: no check
            if self._counter_in_range(e.index, n or 1):
                return f"{obj}[{idx}]"          # a counted loop's counter that stays in range: no check
            if getattr(getattr(e.obj, "var", None), "trusted_index", False) and not self.checked:
                return f"{obj}.data[{idx}]"     # a reverse-mode stack: in range by construction
            if self.checked:
                kind = "local array" if isinstance(ot, T.ArrayType) else ("vector" if isinstance(ot, T.VectorType) else "matrix")
                return f"sj::at_chk({obj}, {idx}, {self.site(e.loc, f'{kind} index out of range ({ot})')}u)"
            return f"sj::at({obj}, {idx})"
        if isinstance(ot, T.BufferType) and not ot.byte_address and self.checked:
            return f"sj::at_chk({obj}, {idx}, {self.site(e.loc, f'buffer index out of range ({ot})')}u)"
        if isinstance(ot, T.PointerType) and self.null_check(e.obj):
            return f"sj::ptr_at({obj}, {idx}, {self.site(e.loc, 'null pointer dereference')}u)"
        return f"{obj}[{idx}]"

    def _counter_in_range(self, index, n: int) -> bool:
        """Is `index` the counter of an enclosing counted loop (passes/red_slots.py counted_loop: constant
        bounds, step +-1, never written by the body) whose every value lies in [0, n)?"""
        while isinstance(index, ir.Convert):
            index = index.operand
        r = self.counter_ranges.get(index.var.uid) if isinstance(index, ir.LocalRef) else None
        return r is not None and 0 <= r[0] and r[1] < n

    def null_check(self, ptr) -> bool:
        """Check this pointer access for null?  Not where the runtime itself bound the pointer: an entry
        point's own pointer parameter when PipelineOptions.trusted_entry_pointers (the functional API's
        generated kernels, whose data pointers are never null while threads run) and not checked."""
        if not self.null_checks():
            return False
        if self.checked or not self.trusted_entry_pointers or self.cur_fn is None or \
                id(self.cur_fn) not in self.entry_ids:
            return True
        while isinstance(ptr, ir.Convert):
            ptr = ptr.operand
        return not (isinstance(ptr, ir.LocalRef) and any(ptr.var is p for p in self.cur_fn.params))

    def null_checks(self) -> bool:
        """Pointer accesses check for null on the CPU (a null pointer uniform must not crash the Python
        process) and in the checked mode; the CUDA default mode leaves them to the driver (a fault
        there is a CUDA error, and a check would keep NVRTC from moving loads ahead of stores)."""
        return self.checked or self.target == "cpp"

    def x_Deref(self, e):
        if not self.null_check(e.ptr):
            return f"(*{self.expr(e.ptr)})"
        return f"sj::deref({self.expr(e.ptr)}, {self.site(e.loc, 'null pointer dereference')}u)"

    def x_AddressOf(self, e):
        return f"(&{self.expr(e.operand)})"

    def x_Select(self, e):
        return f"({self.expr(e.cond)} ? {self.expr(e.then)} : {self.expr(e.else_)})"

    def x_Comma(self, e):
        return f"({self.expr(e.first)}, {self.expr(e.second)})"

    def x_StmtExpr(self, e):
        saved = self.lines
        self.lines = []
        for s in e.stmts:
            self.stmt(s, 0)
        body = " ".join(l.strip() for l in self.lines)
        self.lines = saved
        res = self.expr(e.result) if e.result is not None else ""
        return f"[&]() {{ {body} return {res}; }}()"

    def x_Detach(self, e):
        return self.expr(e.operand)

    def x_NoneExpr(self, e):
        return "{}"

    # ------------------------------------------------------------------ statements

    def out(self, depth: int, text: str):
        self.lines.append("    " * depth + text)

    def stmt(self, s: ir.Stmt, d: int):
        loc = getattr(s, "loc", None)
        if loc is not None and loc.line:
            self.cur_loc = loc
        m = getattr(self, "s_" + type(s).__name__)
        m(s, d)

    def s_Block(self, s, d):
        self.out(d, "{")
        for x in s.stmts:
            self.stmt(x, d + 1)
        self.out(d, "}")

    def s_VarDecl(self, s, d):
        init = f" = {self.expr(s.init)}" if s.init is not None else " = {}"
        self.out(d, f"{self.ctype(s.var.type)} {self.var_name(s.var)}{init};")

    def s_ExprStmt(self, s, d):
        self.out(d, f"{self.expr(s.expr)};")

    def s_If(self, s, d):
        self.out(d, f"if ({self.expr(s.cond)})")
        self.braced(s.then, d)
        if s.else_ is not None:
            self.out(d, "else")
            self.braced(s.else_, d)

    def braced(self, s, d):
        if isinstance(s, ir.Block):
            self.stmt(s, d)
        else:
            self.out(d, "{")
            self.stmt(s, d + 1)
            self.out(d, "}")

    def new_label(self, base: str) -> str:
        self.label_uid += 1
        return f"sj_{base}_{self.label_uid}"

    def s_Loop(self, s, d):
        brk = self.new_label("brk")
        cont = self.new_label("cont")
        self.loop_labels.append((s.label, brk, cont, "loop"))
        self.out(d, "{")
        for i in s.init:
            self.stmt(i, d + 1)
        if self.unroll_loop(s):
            self.out(d + 1, "#pragma unroll")
        cond = self.expr(s.cond) if s.cond is not None else "true"
        if s.kind == "for":
            step = self.expr(s.step) if s.step is not None else ""
            self.out(d + 1, f"for (; {cond}; {step})")
        elif s.kind == "while":
            self.out(d + 1, f"while ({cond})")
        else:
            self.out(d + 1, "do")
        self.out(d + 1, "{")
        counted = counted_loop(s)
        if counted is not None and counted.trips > 0:
            last = counted.start + (counted.trips - 1) * counted.step
            self.counter_ranges[counted.var.uid] = (min(counted.start, last), max(counted.start, last))
        self.stmt(s.body, d + 2)
        if counted is not None:
            self.counter_ranges.pop(counted.var.uid, None)
        self.out(d + 2, f"{cont}:;")
        if s.kind == "do":
            self.out(d + 1, f"}} while ({cond});")
        else:
            self.out(d + 1, "}")
        self.out(d, "}")
        self.out(d, f"{brk}:;")
        self.loop_labels.pop()

    def unroll_loop(self, s) -> bool:
        """Ask the C++ compiler to unroll this loop ([ForceUnroll]; CUDA only, see cuda.py)."""
        return bool(s.attrs.get("unroll")) and self.target == "cuda"

    def s_Switch(self, s, d):
        brk = self.new_label("brk")
        self.loop_labels.append((s.label, brk, None, "switch"))
        self.out(d, f"switch ({self.expr(s.value)})")
        self.out(d, "{")
        for c in s.cases:
            for v in c.values:
                self.out(d, f"case {self.const(s.value.type if not isinstance(s.value.type, T.EnumType) else s.value.type.underlying, v)}:")
            if c.is_default:
                self.out(d, "default:")
            self.out(d + 1, "{")
            for x in c.body:
                self.stmt(x, d + 2)
            self.out(d + 1, "}")
        self.out(d, "}")
        self.out(d, f"{brk}:;")
        self.loop_labels.pop()

    def s_Break(self, s, d):
        if s.label is None:
            self.out(d, "break;")
            return
        for label, brk, cont, kind in reversed(self.loop_labels):
            if label == s.label:
                self.out(d, f"goto {brk};")
                return
        self.out(d, "break;")

    def s_Continue(self, s, d):
        if s.label is None:
            self.out(d, "continue;")
            return
        for label, brk, cont, kind in reversed(self.loop_labels):
            if label == s.label and kind == "loop":
                self.out(d, f"goto {cont};")
                return
        self.out(d, "continue;")

    def s_Return(self, s, d):
        if s.value is None:
            self.out(d, "return;")
        else:
            self.out(d, f"return {self.expr(s.value)};")

    def s_Discard(self, s, d):
        self.out(d, "return;")

    # ------------------------------------------------------------------ functions

    def param_decl(self, p: ir.Var) -> str:
        ct = self.ctype(p.type)
        if p.direction in ("out", "inout"):
            return f"{ct}& {self.var_name(p)}"
        return f"{ct} {self.var_name(p)}"

    def prototype(self, fn: ir.Function) -> str:
        ps = ", ".join([self.param_decl(p) for p in fn.params] + self.depth_param(fn))
        return f"static {self.ctype(fn.ret)} {fn.name}({ps})"

    def depth_param(self, fn: ir.Function) -> list[str]:
        return ["int sj_depth"] if id(fn) in self.depth_fns else []

    def function(self, fn: ir.Function, guard_recursion: bool = False):
        self.out(0, self.prototype(fn))
        self.label_uid = 0
        self.cur_fn, self.cur_loc = fn, None
        # A non-void function whose body can fall off its end returns a zero value there (C++ would make
        # that undefined behaviour, which the optimizer may turn into anything).
        stmts = fn.body.stmts if isinstance(fn.body, ir.Block) else None
        falls = fn.ret != T.VOID and not (stmts and isinstance(stmts[-1], ir.Return))
        if guard_recursion or falls:
            self.out(0, "{")
            if guard_recursion:       # fn is on a call cycle (program.py): a recursion guard first
                site = self.site(fn.loc, f"recursion too deep in '{getattr(fn, 'slang_name', fn.name)}'")
                ret = "return;" if fn.ret == T.VOID else "return {};"
                if id(fn) in self.depth_fns:      # depth counter (CUDA): no assumption on the stack layout
                    self.out(1, f"if (sj::depth_exceeded(sj_depth, {self.depth_limit}, {site}u)) {ret}")
                else:                             # stack address (CPU): the thread's stack mark
                    self.out(1, f"if (sj::stack_exhausted({site}u)) {ret}")
            self.stmt(fn.body, 1)
            if falls:
                self.out(1, "return {};")
            self.out(0, "}")
        else:
            self.stmt(fn.body, 0)
        self.out(0, "")


# ---------------------------------------------------------------------- layouts

