"""The leaf of a generator argument (call_id, thread_id, grid, wang_hash, rand_float): what the generated kernel
computes for it at each call index.  See calldata.py for the overall model."""
from __future__ import annotations

import struct

from . import typeview as S
from .calldata import _I32
from .generators import Generator
from .leaves import Leaf


class GeneratorLeaf(Leaf):
    def __init__(self, name, ptype, getter, gen: Generator, cd_hint=None):
        super().__init__(name, ptype, getter)
        self.gen = gen
        self.kind = gen.kind
        if self.kind == "grid":
            self.k = gen.dims
            self.has_shape = True
        elif self.kind == "call_id":
            self.k = -1
        self.cd = 0

    def uniforms(self):
        if self.kind == "grid":
            return [(self.u + "_off", f"int[{self.k}]"), (self.u + "_st", f"int[{self.k}]")]
        if self.kind in ("wang_hash", "rand_float"):
            u = [(self.u + "_seed", "uint"), (self.u + "_w", "int")]
            if self.kind == "rand_float":
                u += [(self.u + "_lo", "float"), (self.u + "_hi", "float")]
            return u
        return []

    def _deliver(self, comps: list, order_array: bool) -> str:
        """Deliver a list of int expressions (array order) to the parameter type."""
        P = self.ptype
        if isinstance(P, S.ScalarT):
            return f"{P.name}({comps[-1]})" if comps else f"{P.name}(0)"
        if isinstance(P, S.VectorT):
            n = P.n
            rev = list(reversed(comps))[:n]
            rev += ["0"] * (n - len(rev))
            return f"{P.name}({', '.join(f'{P.elem.name}({c})' for c in rev)})"
        if isinstance(P, S.ArrayT):
            n = P.n
            cs = comps[-n:] if len(comps) >= n else ["0"] * (n - len(comps)) + comps
            return "{" + ", ".join(f"{P.elem.name}({c})" for c in cs) + "}"
        raise ValueError(f"Could not find suitable conversion from {self._gname()} to {P.name}")

    def _gname(self):
        if self.kind == "grid":
            return f"GridArg<{self.k}>"
        return {"call_id": "CallIdArg", "thread_id": "ThreadIdArg", "wang_hash": "WangHashArg",
                "rand_float": "RandFloatArg"}[self.kind]

    def emit_load(self, kb):
        P = self.ptype
        if self.kind == "call_id":
            return self._materialize(kb, self._deliver([kb.cid(c) for c in range(kb.cd)], True))
        if self.kind == "grid":
            comps = [f"({self.u}_off[{i}] + {kb.cid(self.mapping[i])} * {self.u}_st[{i}])" for i in range(self.k)]
            return self._materialize(kb, self._deliver(comps, True))
        if self.kind == "thread_id":
            tid = kb.tid or kb.flat             # the dispatch thread (differs from the call index in call groups)
            if isinstance(P, S.ScalarT):
                return f"{P.name}({tid})"
            if isinstance(P, S.VectorT):
                comps = [tid] + ["0"] * (P.n - 1)
                return f"{P.name}({', '.join(f'{P.elem.name}({c})' for c in comps)})"
            raise ValueError(f"Could not find suitable conversion from ThreadIdArg to {P.name}")
        if self.kind == "wang_hash":
            if isinstance(P, S.ScalarT):
                return f"{P.name}(_sj_wang_hash_scalar(uint({kb.flat}), {self.u}_seed, {self.u}_w))"
            return f"{P.name}(_sj_wang_hash_vec<{P.n}>(uint({kb.flat}), {self.u}_seed, {self.u}_w))"
        if self.kind == "rand_float":
            lo, hi = self.u + "_lo", self.u + "_hi"
            if isinstance(P, S.ScalarT):
                return (f"{P.name}(_sj_hash_to_float(_sj_wang_hash_scalar(uint({kb.flat}), {self.u}_seed, "
                        f"{self.u}_w), {lo}, {hi}))")
            var = kb.tmp()
            kb.line(f"vector<uint, {P.n}> {var}_h = _sj_wang_hash_vec<{P.n}>(uint({kb.flat}), {self.u}_seed, {self.u}_w);")
            kb.line(f"{P.name} {var};")
            for i in range(P.n):
                kb.line(f"{var}[{i}] = _sj_hash_to_float({var}_h[{i}], {lo}, {hi});")
            return var
        raise ValueError(f"unknown generator {self.kind}")

    def _materialize(self, kb, expr):
        if expr.startswith("{"):
            var = kb.tmp()
            kb.line(f"{self.ptype.name} {var} = {expr};")
            return var
        return expr

    def shape(self, v):
        if self.kind == "grid":
            return tuple(v.shape)
        return ()

    def pack(self, v, blk, call_shape, keep):
        o = self.offsets
        if self.kind == "grid":
            struct.pack_into(f"<{self.k}i", blk, o[self.u + "_off"], *v.offset)
            struct.pack_into(f"<{self.k}i", blk, o[self.u + "_st"], *v.stride)
        elif self.kind in ("wang_hash", "rand_float"):
            struct.pack_into("<I", blk, o[self.u + "_seed"], v.seed)
            _I32.pack_into(blk, o[self.u + "_w"], v.warmup)
            if self.kind == "rand_float":
                struct.pack_into("<f", blk, o[self.u + "_lo"], v.min)
                struct.pack_into("<f", blk, o[self.u + "_hi"], v.max)
