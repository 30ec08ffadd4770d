"""Kernel generation for one call signature: the generated Slang entry point of a `CallData` (forward or
`.bwds`), its unroll factor and thread shape.  A mixin of binding.CallData, whose fields it reads."""
from __future__ import annotations

import os
from typing import Optional

import numpy as np

from . import typeview as S
from .binder import _all_leaves, _is_tensor
from .callgroups import call_group_head
from .calldata import _zero_expr
from .callhelpers import _constant_decl, _decl_type, _uniform_decl, _value_for
from .genleaf import GeneratorLeaf
from .kernelbuilder import KernelBuilder
from .leaves import ContainerLeaf, TensorParamLeaf

class CallKernelGen:
    """The kernel-generation half of CallData (binding.py)."""

    @property
    def pipeline(self) -> str:
        """Identifies the compiled kernel: calls whose generated kernels are the same program share it."""
        return self.kernel.compiled.source_sha256().hex()

    def _pick_unroll(self) -> int:
        """Call elements per thread (the most; each call picks fewer when small, see run).  On a GPU enough
        that a thread moves about 64 bytes of container arguments (reads and writes), at most 8: a streaming
        kernel needs some 16-32 bytes of reads in flight per thread to reach the memory bandwidth.  1 when no
        container argument is bound (nothing to overlap; the function would only be inlined more often), and
        on the CPU, whose threads run in order anyway.  SLANGJIT_FUNCTIONAL_UNROLL overrides (tests, tuning)."""
        if self.groups is not None or self.uses_csi or self.uses_cuda_ids:    # one element per thread
            return 1
        env = os.environ.get("SLANGJIT_FUNCTIONAL_UNROLL", "").strip()
        if env:
            return max(1, int(env))
        if not self.gpu:
            return 1
        nbytes = 0
        for b in self.bound + ([self.result] if self.result is not None else []):
            for lf in _all_leaves(b.leaf) if b.leaf is not None else ():
                if not isinstance(lf, ContainerLeaf):
                    continue
                n = 1                                 # the value (read, written, or both)
                if self.bwds:                         # .bwds: no value for an output; its gradient read,
                    n = (b.direction != "out") + (b.direction != "in" and lf.grad_in) + \
                        2 * (b.direction != "out" and lf.grad_out)    # an input's gradient accumulated
                nbytes += (lf.ptype.size or 4) * n
        if nbytes == 0:
            return 1
        return max(1, min(8, 64 // nbytes))

    def _resident_threads(self) -> int:
        """Threads a GPU holds at once (0 on the CPU).  A call runs u = n / this elements per thread (1 <= u
        <= unroll): fewer elements per thread where more would leave thread slots of the GPU idle.
        SLANGJIT_FUNCTIONAL_RESIDENT_THREADS overrides (1: always `unroll`, e.g. to test that path on a GPU)."""
        if not self.gpu or self.unroll <= 1:
            return 0
        env = os.environ.get("SLANGJIT_FUNCTIONAL_RESIDENT_THREADS", "").strip()
        if env:
            return max(1, int(env))
        info = getattr(self.device, "info", None)
        return int(getattr(info, "num_threads", 0) or 132 * 2048)

    def _check_bwds_grads(self, args, kwargs):
        """`.bwds` needs the output gradients: a differentiable result/out argument must carry them."""
        outs = [b for b in self.bound if b.direction == "out"]
        if self.result is not None:
            if self.result.leaf is None and self.result.ptype.differentiable:
                raise ValueError(f"bwds of '{self.name}': the result's gradients are needed: pass the result "
                                 "tensor (with grads attached) as _result= or as the last positional argument")
            outs.append(self.result)
        for b in outs:
            leaf = b.leaf
            if b.no_diff or not b.ptype.differentiable or leaf is None:
                continue
            v = _value_for(b, args, kwargs, self.sources)
            if _is_tensor(v) and v.grad_in is None:
                raise ValueError(f"bwds of '{self.name}': argument '{b.pname}' is an output but has no gradients "
                                 "to read (attach them with Tensor.with_grads() and fill grad_in)")
            if isinstance(v, np.ndarray):
                raise ValueError(f"bwds of '{self.name}': argument '{b.pname}' is a numpy array, which carries no "
                                 "gradients (use a spy.Tensor with grads)")

    def _call_target(self, gen_args) -> str:
        cand = self.cand
        g = ""
        if gen_args:
            g = "<" + ", ".join(a.name if isinstance(a, S.SType) else str(a) for a in gen_args) + ">"
        if cand.owner is None:
            return cand.name + g
        if cand.is_ctor:
            return cand.owner.name
        return f"{cand.owner.name}.{cand.name}{g}"

    def _codegen(self, gen_args, linear: bool = False, nt: Optional[int] = None,
                 unroll: Optional[int] = None, unit: Optional[dict] = None) -> str:
        """The kernel's Slang text.  Group g, thread t handles the call elements g * nt * u + t + j * nt for
        j < u (u = `_sj_u` <= unroll, chosen per call): `unroll` independent loads per argument in flight per
        thread, each coalesced across the group, which a one-element-per-thread kernel lacks to reach the
        memory bandwidth.  Element j > 0 of a thread past the end reads at element 0's index (harmless, the
        reads have no effect) and skips its call and stores."""
        nt = nt or self.nt
        U = unroll or self.unroll
        cd = self.cd
        kb = KernelBuilder(cd, linear, unit)
        params = ["uint3 _sj_gid : SV_GroupID", "uint3 _sj_gtid : SV_GroupThreadID", "uniform int _sj_n"]
        if U > 1:
            params.append("uniform int _sj_u")
        if cd:
            params.append(f"uniform int _sj_cs[{cd}]")
        G = self.groups
        if G is not None:
            params += [f"uniform int _sj_cg[{cd}]", f"uniform int _sj_gg[{cd}]"]
        for lf in self.leaves:
            for uname, utype in lf.uniforms():
                params.append(_uniform_decl(utype, uname))
        ind = kb.indent
        span = f"({nt} * _sj_u)" if U > 1 else str(nt)
        head = [f"{ind}{kb.ity} _sj_base = {kb.ity}(_sj_gid.x) * {span} + {kb.ity}(_sj_gtid.x);"]
        if unit is None:            # the unit variant runs full groups only (dispatch_block), unmasked
            head.append(f"{ind}if (_sj_base >= _sj_n) return;")
        if self.uses_cuda_ids:     # slang-torch's cudaThreadIdx() & co.: blocks of nt threads over the n threads
            head.append(f"{ind}_sjt_setup(uint(_sj_base), uint3({nt}, 1, 1), uint3((uint(_sj_n) + {nt - 1}) / {nt}, 1, 1));")
        if G is not None or self.uses_csi:
            head += [ind + ln for ln in call_group_head(self.cd, self.groups, self.uses_csi)]
            if G is not None:
                kb.tid = "_sj_t"
        target = self._call_target(gen_args)
        loads, bodies = [], []
        for j in range(U):
            sfx = f"_{j}" if U > 1 else ""
            kb.start_element(sfx)
            if j == 0:
                kb.line(f"{kb.ity} {kb.flat} = _sj_base;")
            else:
                kb.line(f"bool _sj_ok{sfx} = _sj_u > {j} && _sj_n - _sj_base > {j * nt};")   # no int overflow
                kb.line(f"int {kb.flat} = _sj_ok{sfx} ? _sj_base + {j * nt} : _sj_base;")
            if self.bwds:
                self._codegen_bwds(kb, target)
            else:
                self._codegen_fwd(kb, target)
            loads += kb.load_lines
            if j == 0:
                bodies += kb.body_lines
            else:
                bodies += [f"{ind}if (_sj_ok{sfx}) {{"] + [ind + ln for ln in kb.body_lines] + [f"{ind}}}"]
        body = "\n".join(head + loads + bodies)
        consts = "".join(_constant_decl(k, v) for k, v in self.node.constants_.items())
        consts += getattr(self.node, "prelude_", "")
        return ("\n// ---- generated by slangjit.functional ----" + S.library_imports(self.module._source_text) + consts + "\n"
                f"[shader(\"compute\")]\n[numthreads({nt}, 1, 1)]\n"
                f"void _sj_main({', '.join(params)})\n{{\n{body}\n}}\n")

    def _codegen_fwd(self, kb, target):
        argv, outs = [], []
        for j, b in enumerate(self.bound):
            var = kb.name(f"_v{j}")
            if b.direction == "out":
                outs.append(f"{b.ptype.name} {var};")
            else:
                kb.line(f"{_decl_type(b.ptype, b.leaf)} {var} = {b.leaf.emit_load(kb)};")
            argv.append(var)
        kb.start_body()
        for ln in outs:
            kb.line(ln)
        if self.cand.has_this:
            call = f"{argv[0]}.{self.cand.name}({', '.join(argv[1:])})"
        else:
            call = f"{target}({', '.join(argv)})"
        vr = kb.name("_vr")
        if self.result is not None:
            kb.line(f"{self.result.ptype.name} {vr} = {call};")
        else:
            kb.line(f"{call};")
        for j, b in enumerate(self.bound):
            if b.direction in ("out", "inout") and not isinstance(b.leaf, TensorParamLeaf):
                b.leaf.emit_store(kb, argv[j])
        if self.result is not None:
            self.result.leaf.emit_store(kb, vr)

    def _codegen_bwds(self, kb, target):
        argv, post = [], []

        def grad_in(leaf):
            # an output gradient is read in the load phase, into a local (an initializer list stays inline)
            e = leaf.emit_grad_in(kb)
            if e.startswith("{"):
                return e
            g = kb.name(f"_g{len(argv)}")
            kb.line(f"var {g} = {e};")
            return g

        for j, b in enumerate(self.bound):
            var = kb.name(f"_v{j}")
            P = b.ptype
            diff = (not b.no_diff) and P.differentiable and not isinstance(b.leaf, (TensorParamLeaf, GeneratorLeaf))
            if b.direction == "out":
                if diff:
                    argv.append(grad_in(b.leaf))
                continue
            kb.line(f"{_decl_type(P, b.leaf)} {var} = {b.leaf.emit_load(kb)};")
            if not diff:
                argv.append(var)
                continue
            pv = kb.name(f"_p{j}")
            d0 = b.leaf.emit_grad_in(kb) if b.direction == "inout" else _zero_expr(P.derivative)
            if d0.startswith("{"):               # an initializer list (array / struct zero) needs a typed local
                z = kb.name(f"_z{j}")
                kb.line(f"{P.derivative.name} {z} = {d0};")
                d0 = z
            kb.line(f"var {pv} = diffPair({var}, {d0});")
            argv.append(pv)
            post.append((b, pv, b.leaf.emit_grad_prefetch(kb)))
        if self.result is not None and self.ret_t.differentiable:
            argv.append(grad_in(self.result.leaf))
        kb.start_body()
        if self.cand.has_this:
            kb.line(f"bwd_diff({self.cand.owner.name}.{self.cand.name})({', '.join(argv)});")
        else:
            kb.line(f"bwd_diff({target})({', '.join(argv)});")
        for b, pv, pre in post:
            b.leaf.emit_grad_out(kb, f"{pv}.d", pre)

