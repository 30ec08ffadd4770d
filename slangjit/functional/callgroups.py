"""Kernel-side helpers of a call that SlangPy's call model adds to the plain element loop (binding.py
CallData and rawdispatch.py use them): call groups (`func.call_group_shape(G)`), CallShapeInfo's per-thread
statics (slangpy.slang), link-time constants (`func.constants`), and instances (objects with get_this /
update_this) resolved once per call."""
from __future__ import annotations

from typing import Optional



def call_groups(G: Optional[tuple], cd: int) -> Optional[tuple]:
    """The call group shape padded with leading 1s to the call's `cd` dimensions; None for no groups
    (none given, or all 1s)."""
    if G is None:
        return None
    if len(G) > cd:
        raise ValueError(f"call_group_shape dimension ({len(G)}) is larger than the call_shape dimension "
                         f"({cd}): call_group_shape cannot have more dimensions than call_shape")
    G = (1,) * (cd - len(G)) + tuple(G)
    return None if all(g == 1 for g in G) else G


def grid_of_groups(cs, G) -> tuple:
    """(ceil(call shape / G), threads to launch = prod(grid) * prod(G))."""
    gg = [-(-c // g) for c, g in zip(cs, G)]
    n = 1
    for c, g in zip(gg, G):
        n *= c * g
    return gg, n


def call_group_head(cd: int, groups: Optional[tuple], csi: bool) -> list:
    """Kernel lines that turn the thread index `_sj_base` into the call index.  With call groups G (a grid
    gg of groups, uniforms `_sj_cg` = G and `_sj_gg` = gg; `_sj_n` = prod(gg) * prod(G) threads): thread t
    runs element t % |G| of group t / |G|, both row-major; an element past the call shape returns, and
    `_sj_base` becomes its flat call index (`_sj_t` keeps the thread's).  With `csi`, the lines also set
    CallShapeInfo's statics (call id, group id, thread id in the group; without groups every element is a
    group of one)."""
    L = []
    if groups is not None:
        gsz = 1
        for g in groups:
            gsz *= g
        L += ["int _sj_t = _sj_base;", f"int _sj_gi = _sj_t / {gsz};", f"int _sj_wi = _sj_t % {gsz};",
              f"int _sj_cgid[{cd}];", f"int _sj_cgt[{cd}];", f"int _sj_cidv[{cd}];"]
        for c in reversed(range(cd)):
            L += [f"_sj_cgt[{c}] = _sj_wi % _sj_cg[{c}]; _sj_wi = _sj_wi / _sj_cg[{c}];",
                  f"_sj_cgid[{c}] = _sj_gi % _sj_gg[{c}]; _sj_gi = _sj_gi / _sj_gg[{c}];",
                  f"_sj_cidv[{c}] = _sj_cgid[{c}] * _sj_cg[{c}] + _sj_cgt[{c}];",
                  f"if (_sj_cidv[{c}] >= _sj_cs[{c}]) return;"]
        L.append("_sj_base = 0;")
        L += [f"_sj_base = _sj_base * _sj_cs[{c}] + _sj_cidv[{c}];" for c in range(cd)]
        cid, gid, gtid = "_sj_cidv[{c}]", "_sj_cgid[{c}]", "_sj_cgt[{c}]"
    else:
        if cd:
            L += [f"int _sj_cidv[{cd}];", "int _sj_r = _sj_base;"]
            for c in reversed(range(cd)):
                L.append(f"_sj_cidv[{c}] = _sj_r % _sj_cs[{c}]; _sj_r = _sj_r / _sj_cs[{c}];")
        cid, gid, gtid = "_sj_cidv[{c}]", "_sj_cidv[{c}]", "0"
    if csi:
        for s in ("call_id", "call_group_id", "call_group_thread_id"):
            L.append(f"_sj_csi_{s}.dimension = {cd};")
        for c in range(cd):
            L += [f"_sj_csi_call_id.shape[{c}] = {cid.format(c=c)};",
                  f"_sj_csi_call_group_id.shape[{c}] = {gid.format(c=c)};",
                  f"_sj_csi_call_group_thread_id.shape[{c}] = {gtid.format(c=c)};"]
    return L
