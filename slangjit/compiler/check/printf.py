"""`printf(format, args...)` in kernels (Slang's debug printing, C-style format strings).

The format must be a string literal.  Each conversion is matched with its argument here, so a
mismatch is a located diagnostic instead of undefined behaviour in C: integer conversions
(`d i u o x X c`) take bool / integer scalars, floating conversions (`f F e E g G a A`) take
half / float / double scalars, `%s` takes a string literal.  The checked call is an
`Intrinsic("sj::printf")` whose format is rewritten with the length modifiers of the C types the
arguments are converted to (`long long`, `unsigned long long`, `double`), so the host's and the
device's printf read exactly what is passed (emit/prelude/14_printf.h prints one call's text with
one write, so lines of many threads never interleave mid-line).

`%d`/`%i` read the argument as a signed integer of its own width and `%u`/`%x`/`%o` as unsigned
(a `uint` 4294967295 printed with `%d` is -1, as C's and CUDA's printf print it)."""
from __future__ import annotations

import re

from ..parse import ast
from ..ir import nodes as ir
from .. import types as T

PRINTF_INTRINSIC = "sj::printf"

_SPEC = re.compile(r"%([-+ #0]*)(\*|\d+)?(?:\.(\*|\d*))?(hh|h|ll|l|j|z|t|L)?([diouxXcfFeEgGaAsp%]|.?)")
_INT_CONV = "diouxXc"
_FLOAT_CONV = "fFeEgGaA"


def _int_conv(x: ir.Expr, conv: str, signed_out: bool) -> ir.Expr:
    """x (bool / integer) as the C type the rewritten conversion reads: `long long` or `unsigned long long`,
    after reinterpreting it at its own width with the conversion's signedness."""
    st = x.type
    bits = 32 if st == T.BOOL or st.bits <= 32 else 64
    if st == T.BOOL:
        x = ir.Convert(T.INT, x, loc=x.loc)
        st = T.INT
    elif st.bits < 32:
        x = ir.Convert(T.INT if st.kind == "int" else T.UINT, x, loc=x.loc)
        st = x.type
    same = T.INT if bits == 32 else T.INT64
    same_u = T.UINT if bits == 32 else T.UINT64
    want = same if signed_out else same_u
    if st != want:
        x = ir.Convert(want, x, loc=x.loc)
    return ir.Convert(T.INT64 if signed_out else T.UINT64, x, loc=x.loc) if bits == 32 else x


def check_printf(checker, e: ast.Call, ctx) -> ir.Expr:
    loc = e.loc
    if not e.args or not isinstance(e.args[0], ast.StringLit):
        raise checker.err("E3100", "printf's first argument must be a string literal (the format)",
                          e.args[0].loc if e.args else loc)
    fmt = e.args[0].value
    args = [checker.expr(a, ctx) for a in e.args[1:]]
    out_fmt: list[str] = []
    out_args: list[ir.Expr] = [None]
    k = 0
    pos = 0
    for m in _SPEC.finditer(fmt):
        out_fmt.append(fmt[pos:m.start()])
        pos = m.end()
        flags, width, prec, _length, conv = m.groups()
        if conv == "%" and not (flags or width or prec):
            out_fmt.append("%%")
            continue
        if conv == "" or conv not in _INT_CONV + _FLOAT_CONV + "s" or "*" in (width or "") + (prec or ""):
            raise checker.err("E3101", f"printf: unsupported conversion '{m.group(0)}' in the format "
                                       f"(supported: %d %i %u %o %x %X %c %f %F %e %E %g %G %a %A %s %%)", e.args[0].loc)
        if k >= len(args):
            raise checker.err("E3102", f"printf: the format has more conversions than the {len(args)} "
                                       f"argument(s) given (conversion {k + 1}: '{m.group(0)}')", loc)
        a = args[k]
        aloc = e.args[k + 1].loc
        k += 1
        head = "%" + flags + (width or "") + ("." + prec if prec is not None else "")
        t = a.type
        if isinstance(t, T.EnumType):
            a = ir.Convert(t.underlying, a, loc=aloc)
            t = t.underlying
        if conv in _INT_CONV:
            if not (isinstance(t, T.ScalarType) and (t == T.BOOL or t.kind in ("int", "uint"))):
                raise checker.err("E3103", f"printf: argument {k} is '{t}' but '{m.group(0)}' prints an integer "
                                           f"(use %f / %g for floating-point values)", aloc)
            if conv == "c":
                out_args.append(ir.Convert(T.INT, a, loc=aloc) if t != T.INT else a)
                out_fmt.append(head + "c")
            else:
                signed_out = conv in "di"
                out_args.append(_int_conv(a, conv, signed_out))
                out_fmt.append(head + "ll" + conv)
        elif conv in _FLOAT_CONV:
            if not (isinstance(t, T.ScalarType) and t.kind == "float"):
                raise checker.err("E3103", f"printf: argument {k} is '{t}' but '{m.group(0)}' prints a "
                                           f"floating-point value (use %d / %u for integers)", aloc)
            out_args.append(ir.Convert(T.DOUBLE, a, loc=aloc) if t != T.DOUBLE else a)
            out_fmt.append(head + conv)
        else:   # %s
            if not isinstance(t, T.StringType):
                raise checker.err("E3103", f"printf: argument {k} is '{t}' but '%s' prints a string literal", aloc)
            out_args.append(a)
            out_fmt.append(head + "s")
    out_fmt.append(fmt[pos:])
    if k < len(args):
        raise checker.err("E3102", f"printf: {len(args)} argument(s) given but the format has {k} conversion(s)",
                          e.args[k + 1].loc)
    out_args[0] = ir.Const(T.StringType(), "".join(out_fmt), loc=e.args[0].loc)
    return ir.Intrinsic(T.VOID, PRINTF_INTRINSIC, out_args, loc=loc)
