"""Overload resolution, argument binding, kernel generation, compilation and dispatch of one call signature
(`CallData`).  See calldata.py for the leaf types and the kernel layout."""
from __future__ import annotations

import ctypes
import dataclasses
import struct

from ..compiler import SourceSpec, compile_program
from ..compiler.source import CompileError
from ..runtime.base import device_compile_options, thread_count3
from ..runtime.device import _get_pool
from ..runtime.kernel_errors import ErrorRecord, raise_if_failed, sites_lookup
from ..runtime.layout_pack import aligned_zeros
from ..tensor import Tensor
from . import typeview as S
from . import values as V
from .binder import _Fail, _is_tensor, Bound, _all_leaves, Binder
from .calldata import (NUMTHREADS, NUMTHREADS_GPU, staging_for, _py_type_name, generic_names,
                       is_print_generated_shaders, print_generated_shader, unify)
from .callgroups import call_groups, grid_of_groups
from .callhelpers import _bound, _exact, _getter, _type_override, _value_for, dump_generated_shader
from .callkernel import CallKernelGen
from .callviews import DebugBindings, _Once, _is_this
from .errors import KernelGenException, ResolveException
from .fastcall import build_fast_plan
from .leaves import ContainerLeaf, RefLeaf, ValueLeaf

_RESERVED_KW = ("_result", "_thread_count", "_append_to", "_this")
_U64 = struct.Struct("<Q")
_I32 = struct.Struct("<i")

def _generated_kernel_options(device, simd_threads: bool = False):
    """The device's compile options for a generated kernel: its data pointers are the kernel's own
    parameters, bound by this layer and never null while threads run (PipelineOptions.trusted_entry_pointers).
    `simd_threads`: the unit-stride variant, whose threads touch disjoint elements (CpuOptions.simd_threads)."""
    opts = dataclasses.replace(device_compile_options(device), trusted_entry_pointers=True)
    return opts.with_cpu(simd_threads=True) if simd_threads else opts


# ----------------------------------------------------------------------------------------- call data


class CallData(CallKernelGen):
    def __init__(self, node, args: tuple, kwargs: dict):
        self.node = node
        fn = node.function
        self.fn = fn
        self.module = fn.module
        self.device = self.module.device
        self.stage = staging_for(self.device)
        self.gpu = self.stage is not None and self.stage.gpu
        tgs = node.thread_group_size_
        self.nt = tgs[0] * tgs[1] * tgs[2] if tgs else (NUMTHREADS_GPU if self.gpu else NUMTHREADS)
        self.bwds = node.bwds_mode
        self.name = fn.name
        self.refl = self.module._refl
        # an object with get_this() (an instance list, SlangPy's IThis) is asked for its data once while the
        # call is set up (as SlangPy: once for the signature, once here, once per call)
        args = tuple(_Once(a) if _is_this(a) else a for a in args)
        kwargs = {k: (_Once(a) if _is_this(a) else a) for k, a in kwargs.items()}
        cands = fn.overloads
        if self.bwds and not any(c.differentiable for c in cands):
            raise ResolveException(f"Could not call function '{fn.name}': Function is not differentiable")
        errors, ok = [], []
        for c in cands:
            try:
                ok.append(self._try(c, args, kwargs))
            except _Fail as e:
                errors.append((c, str(e)))
        if not ok:
            if len(cands) == 1:
                raise ResolveException(f"Could not call function '{fn.name}':\n{errors[0][1]}")
            lines = "\n".join(f"  {self._sig_str(c)}: {m}" for c, m in errors)
            raise ResolveException(f"Could not call function '{fn.name}':\nUnable to resolve function.\n{lines}")
        if len(ok) > 1:
            ok.sort(key=lambda r: -r[0])
            if ok[0][0] == ok[1][0]:
                raise ResolveException(f"Could not call function '{fn.name}':\nAmbiguous call: "
                                       f"{len(ok)} overloads match the arguments")
        score, self.cand, self.bound, self.result, self.call_expr_parts = ok[0]
        self._finish(args, kwargs)

    def _sig_str(self, c: S.FuncInfo) -> str:
        ps = ", ".join(f"{p.direction + ' ' if p.direction != 'in' else ''}{p.type.name} {p.name}"
                       for p in c.params)
        return f"{c.name}({ps})"

    # -- resolution of one overload

    def _try(self, cand: S.FuncInfo, args: tuple, kwargs: dict):
        node = self.node
        refl = self.refl
        params = list(cand.params)
        this_p = None
        owner = cand.owner
        if cand.has_this:
            # `this` of a differentiable method of a differentiable struct is differentiable, as in Slang
            this_nd = not (cand.differentiable and owner is not None and owner.differentiable)
            this_p = S.ParamInfo("this", "inout" if cand.mutating else "in", this_nd, False, owner)
            params = [this_p] + params
        args = list(args)
        has_result_kw = "_result" in kwargs
        bindings = dict(node.function.explicit_generics.get(cand.key, {}))
        if all(_bound(bindings.get(gp.name)) for gp in cand.generic_params):
            decl_ptypes, ret_t = cand.signature(bindings)
        else:                                   # patterns: generic parameters are GenericT / ValueParam
            decl_ptypes, ret_t = [p.type for p in cand.params], cand.return_type
        has_ret = not isinstance(ret_t, S.VoidT)
        result_from_pos = False
        if len(args) > len(params):
            if self.bwds and has_ret and not has_result_kw and len(args) == len(params) + 1:
                result_from_pos = True
            else:
                n_decl = len(params) - (1 if this_p else 0)
                raise _Fail(f"Too many arguments: expected {n_decl}, got {len(args) - (1 if this_p else 0)}")
        sources: list = [None] * len(params)
        for i, a in enumerate(args[:len(params)]):
            sources[i] = ("pos", i)
        for k in kwargs:
            if k in _RESERVED_KW:
                continue
            idx = next((i for i, p in enumerate(params) if p.name == k), None)
            if idx is None:
                raise _Fail(f"No parameter named '{k}'")
            if sources[idx] is not None:
                raise _Fail(f"Parameter '{k}' specified multiple times")
            sources[idx] = ("kw", k)
        n_used = len(params)
        for i, p in enumerate(params):
            if sources[i] is None:
                if p.has_default and all(sources[j] is None for j in range(i, len(params))):
                    n_used = i
                    break
                raise _Fail(f"Parameter '{p.name}' not specified")
        params = params[:n_used]
        sources = sources[:n_used]

        def value_of(src):
            return args[src[1]] if src[0] == "pos" else kwargs[src[1]]

        # maps (positional maps apply to positional args, keyword maps to keyword args)
        maps = node.maps
        pos_maps, kw_maps = (maps[0], maps[1]) if maps else ((), {})
        for k in kw_maps:
            if k not in kwargs:
                raise _Fail("Too many keyword arguments supplied for explicit vectorization")
        if len(pos_maps) > len(args):
            raise _Fail("Too many positional arguments supplied for explicit vectorization")

        def map_of(src):
            if src[0] == "pos":
                return pos_maps[src[1]] if src[1] < len(pos_maps) else None
            return kw_maps.get(src[1])

        # parameter types, with generic inference
        ptypes = ([owner] if this_p is not None else []) + list(decl_ptypes)
        ptypes = ptypes[:len(params)]
        open_names = set()
        for t in ptypes:
            open_names |= generic_names(t)
        open_names &= {gp.name for gp in cand.generic_params}
        open_names = {n for n in open_names if not _bound(bindings.get(n))}
        if open_names:
            b2 = {}
            for i, (p, t) in enumerate(zip(params, ptypes)):
                if not (generic_names(t) & open_names):
                    continue
                v = value_of(sources[i])
                m = map_of(sources[i])
                override = _type_override(m, refl)
                nat = self._binder().natural(v, t, override, m if isinstance(m, tuple) else None)
                if nat is None:
                    continue
                if not unify(t, nat, b2):
                    raise _Fail(f"Argument '{p.name}' could not be resolved: python type {_py_type_name(v)} does not "
                                f"match slang type {t.name} (parameter '{p.name}')")
            for n in open_names:
                if n not in b2 or not _bound(b2[n]):
                    raise _Fail(f"Ambiguous call: could not infer generic parameter '{n}' from the arguments")
            bindings.update(b2)
            for gname, iface in cand.constraints:        # an inferred type must satisfy its constraint
                t = bindings.get(gname)
                if gname in b2 and isinstance(t, S.SType) and t.is_concrete() and \
                        not self.refl.decls.conforms_to(t.ct, iface):
                    raise _Fail(f"Argument could not be resolved: type {t.name} does not conform to {iface} "
                                f"(generic parameter '{gname}')")
            try:
                decl_ptypes, ret_t = cand.signature(bindings)
            except CompileError as e:
                raise _Fail(f"the arguments do not satisfy the generic parameters' constraints ({e.diagnostic.message if hasattr(e, 'diagnostic') else e})") from None
            ptypes = (([owner] if this_p is not None else []) + list(decl_ptypes))[:len(params)]
        binder = self._binder()
        bound = []
        score = 0
        for i, (p, t) in enumerate(zip(params, ptypes)):
            src = sources[i]
            v = value_of(src)
            getter = _getter(i)
            try:
                m = map_of(src)
                leaf = binder.bind(v, t, p.direction, p.name, getter, _type_override(m, refl),
                                   m if isinstance(m, tuple) else None)
            except _Fail as e:
                raise _Fail(f"Argument '{p.name}' could not be resolved: {e} (parameter '{p.name}')") from None
            m = map_of(src)
            if isinstance(m, tuple):
                leaf.mapping = m
                leaf.explicit_map = True
            if isinstance(leaf, ValueLeaf) and _exact(v, t):
                score += 1
            bound.append(Bound(p.name, t, p.direction, p.no_diff, leaf, i))
        # result
        result = None
        if has_ret:
            rv = kwargs.get("_result") if has_result_kw else (args[-1] if result_from_pos else None)
            if isinstance(rv, (str, type)):
                rv = None
            ri = len(params)
            if rv is not None:
                try:
                    rleaf = binder.bind(rv, ret_t, "out", "_result", _getter(ri))
                except _Fail as e:
                    raise _Fail(f"_result could not be resolved: {e}") from None
            else:
                rleaf = None       # auto-allocated after the call dimensionality is known
            result = Bound("_result", ret_t, "out", False, rleaf, ri)
        gen_args = [bindings[gp.name] for gp in cand.generic_params]
        return score, cand, bound, result, (gen_args, sources, result_from_pos, binder)

    def _binder(self):
        return Binder(self.name, self.refl, self.bwds, self.module.options)

    last_call_shape: tuple = ()          # the call shape of the latest run (SlangPy's CallData.last_call_shape)

    def call(self, _opts=None, *args, **kwargs):
        """Run this call data with new arguments (SlangPy's `CallData.call(runtime_options, *args, **kwargs)`)."""
        if self.node.this is not None:
            args = (self.node.this,) + args
        return self.run(args, kwargs)

    @property
    def debug_only_bindings(self) -> "DebugBindings":
        """How each argument was bound (SlangPy's `debug_only_bindings`): `.args` (positional, in order) and
        `.kwargs` (by name, with `_result`), each with `.vector_mapping.as_tuple()` (the call dimension each
        of its dimensions maps to) and `.vector_type` (the type a thread reads: `.name`, `.full_name`)."""
        return DebugBindings(self)

    # -- dimensionality, codegen, compile

    def _finish(self, args, kwargs):
        node = self.node
        gen_args, self.sources, self.result_from_pos, binder = self.call_expr_parts
        self._snapshots = binder.snapshots          # IThis get_this() values of the current call
        self._snapshots.clear()
        self.ret_t = self.result.ptype if self.result is not None else S.VoidT()
        leaves = []
        for b in self.bound:
            leaves.extend(_all_leaves(b.leaf))
        if self.result is not None and self.result.leaf is not None:
            leaves.extend(_all_leaves(self.result.leaf))
        cd = 0
        for lf in leaves:
            if lf.explicit_map:
                cd = max(cd, (max(lf.mapping) + 1) if lf.mapping else 0)
            elif lf.k > 0:
                cd = max(cd, lf.k)
        self.tc_mode = "_thread_count" in kwargs
        if self.tc_mode and cd != 0:
            raise ValueError("_thread_count is only valid for kernels with call dimensionality 0 "
                             f"(this call has dimensionality {cd})")
        strict = bool(self.module.options.get("strict_broadcasting", False))
        for lf in leaves:
            if lf.explicit_map:
                if lf.mapping is not None and len(lf.mapping) != max(lf.k, 0):
                    raise ValueError(f"Explicit mapping for '{lf.name}' has {len(lf.mapping)} dimensions, the "
                                     f"argument has {lf.k}")
                continue
            if lf.k > 0:
                if strict and lf.k < cd:
                    raise ValueError(f"Strict broadcasting is enabled and the argument `{lf.name}` of type "
                                     f"{lf.ptype.name} has dimensionality of ({lf.k}) while the kernel's "
                                     f"dimensionality is ({cd}).")
                lf.mapping = tuple(cd - lf.k + i for i in range(lf.k))
            else:
                lf.mapping = ()
        if self.bwds:
            self._check_bwds_grads(args, kwargs)
        # auto result
        self.auto_result = None
        if self.result is not None and self.result.leaf is None:
            R = self.result.ptype
            if cd == 0:
                leaf = RefLeaf("_result", R, lambda vals: None, "result")
                self.auto_result = "ref"
            else:
                leaf = ContainerLeaf("_result", R, _getter(self.result.index), R, cd, 0, True, False)
                leaf.mapping = tuple(range(cd))
                self.auto_result = "tensor"
            self.result.leaf = leaf
            leaves.append(leaf)
        for lf in leaves:
            if hasattr(lf, "cd"):
                lf.cd = cd
            lf.stage = self.stage
        self.cd = cd
        self.leaves = leaves
        self.go_leaves = [lf for lf in leaves if isinstance(lf, ContainerLeaf) and lf.grad_out]
        auto_leaf = self.result.leaf if self.auto_result else None
        self.shape_leaves = [lf for lf in leaves if lf.has_shape and lf.k > 0 and lf is not auto_leaf]
        # Containers consumed whole by a vector / matrix / array parameter (no call dimensions): their element
        # dimensions are checked at every call, so a short array is never read or written past its end.
        self.elem_leaves = [lf for lf in leaves if isinstance(lf, ContainerLeaf) and lf.ne and lf.k == 0
                            and lf is not auto_leaf]
        self.post_leaves = [lf for lf in leaves if isinstance(lf, RefLeaf)]
        self.instance_leaves = list(binder.instance_leaves)
        for i, lf in enumerate(leaves):
            lf.u = f"_a{i}"
        # bwds checks
        if self.bwds:
            for b in self.bound + ([self.result] if self.result is not None else []):
                if b.direction == "inout":
                    v = _value_for(b, args, kwargs, self.sources)
                    if _is_tensor(v) and v.grad_in is not None and v.grad_in is v.grad_out:
                        raise ValueError("inout parameter gradients need separate buffers for inputs and outputs "
                                         "(see Tensor.with_grads)")
        # call groups (func.call_group_shape) and CallShapeInfo
        self.groups = call_groups(node.call_group_shape_, cd)
        self.uses_csi = "CallShapeInfo" in self.module._source_text     # (or found in the kernel, _compile)
        self.uses_cuda_ids = S.uses_slangtorch(self.module._source_text)
        self._gen_args = gen_args
        self.unroll = self._pick_unroll()
        self.code = self._codegen(gen_args)
        self._compile()

    def _build(self, code: str, simd_threads: bool = False):
        mod = self.module
        if is_print_generated_shaders():
            print_generated_shader(getattr(self.node, "name", None) or mod.name, code)
        text = mod._source_text + "\n" + code
        dump_generated_shader(mod.name, self.name + ("_bwds" if self.bwds else ""), text)
        spec = SourceSpec(path=mod._source_path, text=text, name=mod.name)
        try:
            compiled = compile_program([spec], ["_sj_main"], target=self.device._target,
                                       include_paths=mod._include_paths,
                                       compiler_args=self.device.compiler_args,
                                       type_conformances=self.node.type_conformances_,
                                       options=_generated_kernel_options(self.device, simd_threads))
        except CompileError as e:
            # An error in the user's module needs no generated kernel beside it; one in the kernel shows it.
            n_user = mod._source_text.count("\n") + 1
            in_user = all(d.loc.line and d.loc.line <= n_user for d in e.diagnostics)
            raise KernelGenException(f"Slang compilation error: {e}" +
                                     ("" if in_user else f"\n--- generated kernel ---{code}")) from None
        kernel = self.device._create_kernel_from_compiled(compiled, "_sj_main")
        launch = getattr(kernel, "launch_raw", None) if self.gpu else None
        return compiled, kernel, (kernel, kernel._fn, launch)

    def _compile(self):
        compiled, self.kernel, self._kern = self._build(self.code)
        if not self.uses_csi and compiled.reflection.uses_call_shape:
            # CallShapeInfo reached through a module the call's module imports: set its statics too
            self.uses_csi = True
            self.unroll = 1
            self.code = self._codegen(self._gen_args)
            compiled, self.kernel, self._kern = self._build(self.code)
        entry = self.kernel.entry
        self._layout = [(f.name, f.offset) for f in entry.params]
        self.psize = max(entry.params_size, 8)
        self.gsize = max(compiled.reflection.globals_size, 8)
        fields = {f.name: f for f in entry.params}
        self.off_n = fields["_sj_n"].offset
        self.off_u = fields["_sj_u"].offset if self.unroll > 1 else None
        self.resident = self._resident_threads()
        self.off_cs = fields["_sj_cs"].offset if self.cd else None
        self.off_cg = fields["_sj_cg"].offset if self.groups is not None else None
        self.off_gg = fields["_sj_gg"].offset if self.groups is not None else None
        for lf in self.leaves:
            for uname, _ in lf.uniforms():
                f = fields.get(uname)
                if f is None:
                    raise KernelGenException(f"Exception in kernel generation: uniform {uname} missing")
                lf.offsets[uname] = f.offset
                if isinstance(lf, ValueLeaf):
                    lf.layout = f.layout
                elif isinstance(lf, RefLeaf) and uname.endswith("_d"):
                    lf.layout = f.layout.element
                elif isinstance(lf, RefLeaf) and uname.endswith("_g"):
                    lf.grad_layout = f.layout.element
            lf.finalize()
        # The linear variant (multi-dimensional calls only: with one call dimension the general kernel already
        # addresses every view as offset + flat * stride), compiled on first use.
        self.lin_slots = [fields[n].offset for lf in self.leaves for n in lf.call_stride_uniforms()] \
            if self.cd >= 2 and self.groups is None and not self.uses_csi else None
        self._lin_kern = None
        self.last_linear = False
        # The unit-stride variant (CPU; calls of UNIT_MIN_THREADS or more whose every view is contiguous in call
        # order and whose gradients are not accumulated atomically), compiled per `_goa` combination on first use.
        unit = (not self.gpu and self.cd >= 1 and self.groups is None and not self.uses_csi and self.unroll == 1
                and not self.uses_cuda_ids
                and self.psize <= 4096 and all(type(lf) in _UNIT_LEAVES for lf in self.leaves))
        self.unit_slots = [fields[n].offset for lf in self.leaves for n in lf.call_stride_uniforms()] \
            if unit else None
        self.goa_slots = [(lf.u + "_goa", lf.offsets[lf.u + "_goa"]) for lf in self.leaves
                          if isinstance(lf, ContainerLeaf) and lf.grad_out] if unit else []
        self._unit_kerns: dict = {}
        # The kernel writes every byte of an auto-allocated result (one store per call element, no thread count
        # of the caller's, an element type without padding): its storage need not be zeroed.
        rt = self.ret_t if self.auto_result == "tensor" else None
        self.fills_result = (rt is not None and not self.tc_mode and self.groups is None
                             and rt.kind in ("scalar", "vector", "matrix") and rt.scalar is not None
                             and rt.size == S.scalar(rt.scalar).size * max(1, _prod(rt.shape)))
        self.last_unit = False
        self._ret_size = (rt.size or 1) if rt is not None else 0
        self.global_fields = {f.name: f for f in compiled.reflection.globals}
        self._zero_g_arr = aligned_zeros(self.gsize)
        self._zero_g = self._zero_g_arr.ctypes.data
        self._zero_globals_arr = self._zero_g_arr
        self._zero_globals = self._zero_g
        self._blk = None
        self._cs_fmt = f"<{self.cd}i"
        self._srcs = [(src[0] == "pos", src[1]) for src in self.sources]
        self._fast_call = None          # fastcall.build_fast_plan, made after the first run
        self._fast_tried = False

    def _linear_strides(self, blk, cs):
        """[(slot, stride)] when every strided view of this call is linear in the flat call index, i.e. its call
        strides (packed, 0 where broadcast) are `stride` times the call shape's row-major strides along every
        call dimension of extent > 1 (contiguous: 1; broadcast everywhere: 0); the slot is the view's last call
        stride, where the linear kernel reads the one stride.  None when a view is not (transposed, partly
        broadcast, sliced along an outer dimension): the general kernel then splits the flat index."""
        cd = self.cd
        row, acc = [0] * cd, 1
        for c in range(cd - 1, -1, -1):
            row[c] = acc
            acc *= cs[c]
        big = [c for c in range(cd) if cs[c] > 1]
        last = big[-1] if big else cd - 1
        fmt = self._cs_fmt
        out = []
        for off in self.lin_slots:
            st = struct.unpack_from(fmt, blk, off)
            ls = st[last] if big else 0
            for c in big:
                if st[c] != ls * row[c]:
                    return None
            out.append((off + 4 * (cd - 1), ls))
        return out

    def _linear_kernel(self):
        code = self._codegen(self._gen_args, linear=True)
        _, kernel, kern = self._build(code)
        if [(f.name, f.offset) for f in kernel.entry.params] != self._layout:
            raise KernelGenException("Exception in kernel generation: the linear variant's parameter layout differs")
        self.code_linear = code
        self._lin_kern = kern
        return kern

    def _unit_strides(self, blk, cs) -> bool:
        """True when every strided view of this call is contiguous in call order (its packed call strides are
        the call shape's row-major strides along every call dimension of extent > 1)."""
        cd = self.cd
        fmt = self._cs_fmt
        acc = 1
        row = [0] * cd
        for c in range(cd - 1, -1, -1):
            row[c] = acc
            acc *= cs[c]
        for off in self.unit_slots:
            st = struct.unpack_from(fmt, blk, off)
            for c in range(cd):
                if cs[c] > 1 and st[c] != row[c]:
                    return False
        return True

    def _unit_kernel(self, goa: tuple):
        code = self._codegen(self._gen_args, unit=dict(zip((n for n, _ in self.goa_slots), goa)))
        _, kernel, kern = self._build(code, simd_threads=True)
        if [(f.name, f.offset) for f in kernel.entry.params] != self._layout:
            raise KernelGenException("Exception in kernel generation: the unit variant's parameter layout differs")
        self.code_unit = code
        self._unit_kerns[goa] = kern
        return kern

    # -- per call

    def _values(self, args: tuple, kwargs: dict):
        vals = [args[i] if pos else kwargs[i] for pos, i in self._srcs]
        snaps = self._snapshots
        if self.instance_leaves:
            snaps.clear()                       # get_this() once per object and call (binder.bind)
        res_v = None
        if self.result is not None:
            if self.result_from_pos:
                res_v = args[-1]
            else:
                res_v = kwargs.get("_result")
                if isinstance(res_v, (str, type)):
                    res_v = None
            vals.append(res_v)
        return vals, res_v

    def call_shape(self, args: tuple, kwargs: dict) -> tuple:
        """The call shape these arguments give (what an auto-allocated result's shape is), without running."""
        return tuple(self._call_shape(self._values(args, kwargs)[0]))

    def _call_shape(self, vals) -> list:
        cs = [1] * self.cd
        for lf in self.elem_leaves:
            lf.shape(lf.get(vals))
        for lf in self.shape_leaves:
            shp = lf.shape(lf.get(vals))
            m = lf.mapping
            for i, n in enumerate(shp):
                c = m[i]
                cur = cs[c]
                if n == cur or n == 1 or n < 0:
                    continue
                if cur == 1:
                    cs[c] = n
                else:
                    raise ValueError(f"Shape mismatch for {lf.name} between value ({n}) and call ({cur})\n"
                                     "This is typically caused when attempting to combine containers with the same "
                                     "dimensionality but different sizes.")
        return cs

    def dispatch_block(self, node, blk, cs, n: int, keep=()) -> None:
        """Launch over a packed parameter block `blk` for `n` threads of call shape `cs`: the linear-index
        variant when the strides allow it, unrolling, the group count, the globals block, then the device's
        launcher (CUDA) or the CPU pool, and the error record.  `keep`: staged memory released after the
        launch (CUDA).  run() and slangjit.torch's direct path both launch through here."""
        kern = self._kern
        unit = None
        if self.unit_slots is not None and n >= UNIT_MIN_THREADS and self._unit_strides(blk, cs):
            goa = tuple(_I32.unpack_from(blk, off)[0] for _, off in self.goa_slots)
            if 1 not in goa:              # an atomic accumulation keeps the general kernel
                unit = self._unit_kerns.get(goa) or self._unit_kernel(goa)
        self.last_unit = unit is not None
        if unit is not None:
            kern = unit
        elif self.lin_slots is not None:
            lin = self._linear_strides(blk, cs)
            self.last_linear = lin is not None
            if lin is not None:
                for off, ls in lin:
                    _I32.pack_into(blk, off, ls)
                kern = self._lin_kern or self._linear_kernel()
        per = self.nt
        if self.off_u is not None:
            u = max(1, min(self.unroll, n // self.resident)) if self.resident else self.unroll
            _I32.pack_into(blk, self.off_u, u)
            per *= u
        groups = -(-n // per)
        if groups <= 0:
            return
        kernel, fn, launch = kern
        if unit is not None:
            self._dispatch_unit(node, unit, blk, n, groups)
            return
        if launch is not None:
            launch(blk, node._globals_array(self) if node.sets else self._zero_g_arr, groups)
            if keep:
                kernel._ctx.defer_release([k[2:] for k in keep])
            return
        gblk = node._globals_block(self) if node.sets else self._zero_g
        gc = _GC.get(groups) or _group_counts(groups)
        rec = ErrorRecord()             # failures the kernel records (runtime/kernel_errors.py)
        if groups < 4:
            fn(gblk, blk, gc, 0, groups, ctypes.addressof(rec))
        else:
            _get_pool().run(fn, (gblk, blk, gc), groups, (ctypes.addressof(rec),), getattr(kernel, "_chunks", None))
        if rec.code:
            raise_if_failed(rec, sites_lookup(kernel.compiled.reflection.error_sites), self.name)

    def _dispatch_unit(self, node, unit, blk, n: int, groups: int) -> None:
        """The unit-stride variant over the full groups (no bounds check: loads and stores without masks),
        then the general kernel over the last, partial group on this thread."""
        gblk = node._globals_block(self) if node.sets else self._zero_g
        gc = _GC.get(groups) or _group_counts(groups)
        full = n // self.nt
        runs = [(unit, 0, full)] + ([(self._kern, full, groups)] if full < groups else [])
        for (kernel, fn, _), b, e in runs:
            rec = ErrorRecord()
            if b or e - b < 4:
                fn(gblk, blk, gc, b, e, ctypes.addressof(rec))
            else:
                _get_pool().run(fn, (gblk, blk, gc), e, (ctypes.addressof(rec),), getattr(kernel, "_chunks", None))
            if rec.code:
                raise_if_failed(rec, sites_lookup(kernel.compiled.reflection.error_sites), self.name)

    def run(self, args: tuple, kwargs: dict):
        node = self.node
        vals, res_v = self._values(args, kwargs)
        snaps = self._snapshots
        cd = self.cd
        cs = self._call_shape(vals)
        self.last_call_shape = tuple(cs)
        auto = None
        if self.auto_result == "tensor":
            auto = Tensor._alloc(self.device, self.ret_t, tuple(cs), not self.fills_result, self._ret_size)
            vals[-1] = auto
        if self.tc_mode:
            n, ty, tz = thread_count3(kwargs["_thread_count"])    # an integer >= 0 ("12", 7.9: errors)
            if ty != 1 or tz != 1:
                raise ValueError(f"_thread_count must be one integer, got {kwargs['_thread_count']!r}")
        else:
            n = 1
            for c in cs:
                n *= c
        G = self.groups
        if G is not None and n:
            gg, n = grid_of_groups(cs, G)
        blk = self._blk
        self._blk = None
        if blk is None:
            blk = ctypes.create_string_buffer(self.psize)
        try:
            _I32.pack_into(blk, self.off_n, n)
            if cd:
                struct.pack_into(self._cs_fmt, blk, self.off_cs, *cs)
            if G is not None:
                struct.pack_into(self._cs_fmt, blk, self.off_cg, *G)
                struct.pack_into(self._cs_fmt, blk, self.off_gg, *gg)
            keep: list = []
            if len(self.go_leaves) > 1:           # two arguments accumulating into one storage: atomics
                seen: dict = {}
                for lf in self.go_leaves:
                    sid = id(lf.get(vals).grad_out.storage)
                    seen[sid] = seen.get(sid, 0) + 1
                for lf in self.go_leaves:
                    lf.shared_grads = seen[id(lf.get(vals).grad_out.storage)] > 1
            for lf in self.leaves:
                lf.pack(lf.get(vals), blk, cs, keep)
            self.dispatch_block(node, blk, cs, n, keep)
        finally:
            self._blk = blk
        # write-backs
        ret = None
        stage = self.stage
        for lf, v, mem, g in keep:
            if stage is not None:
                if lf.kind == "np":
                    if lf.writes and lf.writable:
                        v[...] = stage.read(mem, v.nbytes).view(v.dtype).reshape(v.shape)
                    continue
                if lf.kind not in ("ref", "pair", "result"):
                    if getattr(lf, "is_numpy", False) and lf.writable and mem is not None:
                        # a numpy array bound to a writable Tensor parameter: its staged (contiguous) copy
                        # comes back into the array, views included
                        v[...] = stage.read(mem, v.size * v.itemsize).view(v.dtype).reshape(v.shape)
                    continue                  # nothing else to bring back
                mem = stage.read(mem, max(lf.ptype.size, 8))
                if g is not None:
                    g = stage.read(g, max((lf.ptype.derivative or lf.ptype).size, 8))
            if lf.kind == "ref":
                v.value = V.python_value_of(lf.ptype, mem)
            elif lf.kind == "pair":
                if self.bwds:
                    d = lf.ptype.derivative or lf.ptype
                    v.grad = V.python_value_of(d, g)
                else:
                    v.primal = V.python_value_of(lf.ptype, mem)
            elif lf.kind == "result":
                ret = V.python_value_of(lf.ptype, mem)
        for lf in self.instance_leaves:         # the value the kernel used goes back to its object
            obj = lf.instance_getter(vals)
            r = snaps.get(id(obj))
            f = getattr(obj, "update_this", None)       # optional: a read-only IThis has none
            if r is not None and f is not None:
                f(r[1])
        if self.instance_leaves:
            snaps.clear()
        if not self._fast_tried:          # the signature's fast plan, for the next calls (its library is loaded)
            self._fast_tried = True
            self._fast_call = build_fast_plan(self, UNIT_MIN_THREADS)
        if self.bwds:
            return None
        if self.result is None:
            return None
        if auto is not None:
            ret = auto
        elif self.auto_result is None:
            ret = res_v
        return node._convert_return(ret, self)



_GC: dict = {}


def _group_counts(groups: int):
    """The launcher's uint32[3] group counts (groups, 1, 1), kept for reuse (up to 4096 sizes)."""
    gc = (ctypes.c_uint32 * 3)(groups, 1, 1)
    if len(_GC) < 4096:
        _GC[groups] = gc
    return gc


def _prod(shape) -> int:
    n = 1
    for d in shape or ():
        n *= d
    return n
_UNIT_LEAVES = (ValueLeaf, ContainerLeaf) + tuple(c for c in ValueLeaf.__subclasses__())
# Calls with fewer threads run the general kernel (the unit variant is one more compile: worth it for big calls).
UNIT_MIN_THREADS = 1 << 15
