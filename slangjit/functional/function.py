"""`Function` and its chainable modifiers (`FunctionNode`): `.map`, `.set`, `.constants`, `.return_type`,
`.bwds`, `.call`, `.dispatch` ...  A call looks the argument signature up in the function's cache of
`CallData` (binding.py) and runs it; a miss resolves, generates and compiles a kernel."""
from __future__ import annotations

from typing import Optional

import numpy as np

from ..runtime import layout_pack as lp
from ..runtime.base import normalize_conformances
from ..tensor import NDBuffer, Tensor, struct_np_dtype
from .binding import CallData
from .calldata import signature
from .errors import KernelGenException, ResolveException
from .hooks import find_call_hook
from .rawdispatch import raw_dispatch
from .textures import has_texture, tensor_to_texture, untexture, wants_texture

_RETURN_MODES = {"numpy": "numpy", "tensor": "tensor"}
_HOOKED = object()          # a call signature some hook (functional/hooks.py) claims: no CallData of ours


def _return_mode(t) -> Optional[str]:
    if t is None:
        return None
    if t is np.ndarray or t == "numpy":
        return "numpy"
    if t is Tensor or t == "tensor":
        return "tensor"
    if t is NDBuffer or t == "ndbuffer":
        return "ndbuffer"
    if isinstance(t, str):
        raise ValueError(f"Unknown return type '{t}'")
    raise ValueError(f"Unknown return type '{t!r}'")


class FunctionNode:
    """A function plus modifiers.  Every modifier returns a new node."""

    def __init__(self, function: "Function", parent: Optional["FunctionNode"] = None, **changes):
        self.function = function
        self.module = function.module
        self.name = function.name
        self.parent = parent
        if parent is None:
            self.bwds_mode = False
            self.maps = None
            self.return_type_mode = None
            self.sets: list = []
            self.constants_: dict = {}
            self.this = None
            self.call_group_shape_ = None
            self.thread_group_size_ = None
            self.type_conformances_: tuple = ()
            self.prelude_: str = ""
        else:
            self.bwds_mode = parent.bwds_mode
            self.maps = parent.maps
            self.return_type_mode = parent.return_type_mode
            self.sets = list(parent.sets)
            self.constants_ = dict(parent.constants_)
            self.this = parent.this
            self.call_group_shape_ = parent.call_group_shape_
            self.thread_group_size_ = parent.thread_group_size_
            self.type_conformances_ = parent.type_conformances_
            self.prelude_ = parent.prelude_
        for k, v in changes.items():
            setattr(self, k, v)
        self._key = (self.bwds_mode, _map_key(self.maps), self.return_type_mode,
                     tuple(sorted((k, repr(v)) for k, v in self.constants_.items())),
                     self.call_group_shape_, self.thread_group_size_, self.type_conformances_, self.prelude_)
        self._cache = function._node_caches.setdefault(self._key, {})
        # The calls' CallData by the signature of the arguments as given (the `__call__` fast lookup: filled
        # only for calls without textures, hooks, `this`, `_append_to` or a `_result=` type / name)
        self._fast = function._node_caches.setdefault(("fast",) + self._key, {})

    # identity semantics, spelled out: slangjit.torch passes nodes into torch.compile regions as constants
    # (torch.utils._pytree.register_constant needs explicit __eq__ / __hash__)
    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self) >> 4

    # -- modifiers

    def map(self, *args, **kwargs) -> "FunctionNode":
        return FunctionNode(self.function, self, maps=(tuple(args), dict(kwargs)))

    def return_type(self, t) -> "FunctionNode":
        return FunctionNode(self.function, self, return_type_mode=_return_mode(t))

    def set(self, *args, **kwargs) -> "FunctionNode":
        if kwargs and not args:
            item = dict(kwargs)
        elif len(args) == 1 and not kwargs and (isinstance(args[0], dict) or callable(args[0])):
            item = args[0]
        else:
            raise ValueError("Set requires either keyword arguments or 1 dictionary / hook argument")
        return FunctionNode(self.function, self, sets=self.sets + [item])

    def constants(self, constants: dict) -> "FunctionNode":
        c = dict(self.constants_)
        c.update(constants)
        return FunctionNode(self.function, self, constants_=c)

    def prelude(self, code: str) -> "FunctionNode":
        """Slang text added to the call's generated kernel module (after the module's own declarations), e.g.
        the `export struct VAL : IVal = Val10;` that binds a link-time type of the module.  Preludes given
        in turn are concatenated."""
        if not isinstance(code, str):
            raise TypeError(f"prelude: expected Slang source text (a str), got {type(code).__name__}")
        return FunctionNode(self.function, self, prelude_=self.prelude_ + code + "\n")

    def call_group_shape(self, shape) -> "FunctionNode":
        """Run the call in groups of `shape` elements (padded with leading 1s to the call's dimensions): the
        threads of a dispatch take the groups in turn, each group's elements in row-major order, and the
        function reads its group's index and its index in the group with
        `CallShapeInfo::get_call_group_id()` / `get_call_group_thread_id()`.  `Shape(())` or None: none."""
        if shape is None:
            return FunctionNode(self.function, self, call_group_shape_=None)
        sh = tuple(shape.as_tuple() if hasattr(shape, "as_tuple") else shape)
        for i, n in enumerate(sh):
            if not isinstance(n, (int, np.integer)) or isinstance(n, bool) or n < 1:
                raise ValueError(f"call_group_shape[{i}] = {n} is invalid: every call group dimension must be >= 1")
        return FunctionNode(self.function, self, call_group_shape_=tuple(int(n) for n in sh) or None)

    def thread_group_size(self, size) -> "FunctionNode":
        """Threads per thread group: an int or 1 to 3 ints (a uint3).  Raw `.dispatch` kernels get it as
        their [numthreads]; generated call kernels run groups of the product."""
        vals = list(size) if hasattr(size, "__len__") else [size]
        if not 1 <= len(vals) <= 3 or any(isinstance(x, bool) or not isinstance(x, (int, np.integer)) or x < 1
                                          for x in vals):
            raise ValueError(f"thread_group_size: expected 1 to 3 positive thread counts, got {size!r}")
        vals = [int(x) for x in vals] + [1] * (3 - len(vals))
        if vals[0] * vals[1] * vals[2] > 1024:
            raise ValueError(f"thread_group_size: {vals[0] * vals[1] * vals[2]} threads per group is more than "
                             "the 1024 a GPU allows")
        return FunctionNode(self.function, self, thread_group_size_=tuple(vals))

    def type_conformances(self, conformances) -> "FunctionNode":
        """Interface conformances the call's kernel is compiled with (`spy.TypeConformance(iface, type)`,
        or (iface, type[, id]) tuples): the interface's dynamic values are of those types (a value of
        the interface made without a type, `IVal v;`, is the first of them)."""
        try:
            items = normalize_conformances(conformances)
        except (AttributeError, TypeError) as e:
            raise ValueError(f"type_conformances: expected TypeConformance values ({e})") from None
        mod = self.function.module
        for iface, ty, _ in items:
            for n in (iface, ty):
                if mod.find_type_by_name(str(n)) is None:
                    raise ValueError(f"type_conformances: no type named '{n}' in module '{mod.name}'")
        return FunctionNode(self.function, self, type_conformances_=self.type_conformances_ + tuple(
            (str(i), str(t), int(k)) for i, t, k in items))

    def bind(self, this) -> "FunctionNode":
        return FunctionNode(self.function, self, this=this)

    @property
    def bwds(self) -> "FunctionNode":
        return FunctionNode(self.function, self, bwds_mode=True)

    def as_func(self) -> "FunctionNode":
        return self

    def as_struct(self):
        raise ValueError("Cannot convert a function to a struct")

    # -- calls

    def __call__(self, *args, **kwargs):
        fast = self._fast
        if fast:                                  # (empty for a node with `this`, whose calls never go here)
            cd = fast.get((tuple(map(signature, args)), tuple(kwargs), tuple(map(signature, kwargs.values()))))
            if cd is not None:                    # a signature seen before, with none of the cases below
                f = cd._fast_call
                return f(args, kwargs) if f is not None else cd.run(args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict):
        fast = self.this is None
        if kwargs:
            if "_append_to" in kwargs:
                fast = False
                kwargs = dict(kwargs)
                enc = kwargs.pop("_append_to")
                if enc is not None:
                    return self.append_to(enc, *args, **kwargs)
            r = kwargs.get("_result")
            if isinstance(r, (str, type)):
                kwargs = dict(kwargs)
                del kwargs["_result"]
                if wants_texture(r):
                    return tensor_to_texture(self.return_type("tensor")(*args, **kwargs))
                return self.return_type(r)(*args, **kwargs)
            if has_texture(args, kwargs):
                fast = False
                args, kwargs = untexture(args, kwargs)
        elif has_texture(args, kwargs):
            fast = False
            args, kwargs = untexture(args, kwargs)
        fkey = (tuple(map(signature, args)), tuple(kwargs), tuple(map(signature, kwargs.values()))) if fast else None
        cargs = (self.this,) + args if self.this is not None else args
        key = tuple(map(signature, cargs))
        if kwargs:
            key = (key, tuple((k, signature(v)) for k, v in kwargs.items()))
        cd = self._cache.get(key)
        if cd is None:
            # a signature not seen before: a later stage may claim the call (torch tensors: slangjit.torch)
            hook = find_call_hook(args, kwargs)
            if hook is not None:
                self._cache[key] = _HOOKED
                return hook(self, args, kwargs)
            try:
                cd = CallData(self, cargs, kwargs)
            except (KernelGenException, ResolveException) as e:
                raise e.with_traceback(None) from None       # the message says it all: no internal frames
            self._cache[key] = cd
        elif cd is _HOOKED:
            return find_call_hook(args, kwargs)(self, args, kwargs)
        if fast:
            self._fast[fkey] = cd
        return cd.run(cargs, kwargs)

    def resolve(self, *args, **kwargs) -> CallData:
        """The (cached) CallData that a call with these arguments runs, without running it."""
        return self._call_data(args, kwargs)[0]

    def call(self, *args, **kwargs):
        return self(*args, **kwargs)

    def append_to(self, command_encoder, *args, **kwargs):
        """Record the call into `command_encoder` (Device.create_command_encoder()): it is resolved and
        compiled now and runs when the encoder's command buffer is submitted.  Returns None."""
        if command_encoder is None:
            raise ValueError("append_to: command_encoder is None")
        if getattr(command_encoder, "finished", False):
            raise RuntimeError("Command encoder is finished: create a new one to record more work")
        r = kwargs.get("_result")
        node = self
        if isinstance(r, (str, type)):
            kwargs = dict(kwargs)
            del kwargs["_result"]
            node = self.return_type(r)
        if has_texture(args, kwargs):
            args, kwargs = untexture(args, kwargs)
        hook = find_call_hook(args, kwargs)
        if hook is not None:         # torch tensors: the call (resolved by slangjit.torch) runs at submit
            command_encoder.append(lambda: hook(node, args, kwargs))
            return None
        cd, args = node._call_data(args, kwargs)
        command_encoder.append(lambda: cd.run(args, kwargs))
        return None

    def _call_data(self, args, kwargs):
        if has_texture(args, kwargs):
            args, kwargs = untexture(args, kwargs)
        if self.this is not None:
            args = (self.this,) + args
        key = tuple(map(signature, args))
        if kwargs:
            key = (key, tuple((k, signature(v)) for k, v in kwargs.items()))
        cd = self._cache.get(key)
        if cd is None:
            try:
                cd = CallData(self, args, kwargs)
            except (KernelGenException, ResolveException) as e:
                raise e.with_traceback(None) from None       # the message says it all: no internal frames
            self._cache[key] = cd
        return cd, args

    def debug_build_call_data(self, *args, **kwargs) -> CallData:
        """The CallData a call with these arguments uses (the cached one for their signature)."""
        return self._call_data(args, kwargs)[0]

    def dispatch(self, thread_count, vars: dict = None, command_encoder=None, **kwargs):
        if command_encoder is not None:
            command_encoder.append(lambda: raw_dispatch(self, thread_count, vars or {}, **kwargs))
            return None
        return raw_dispatch(self, thread_count, vars or {}, **kwargs)

    # -- helpers used by CallData

    def _globals_block(self, cd: CallData):
        if not self.sets:
            return cd._zero_globals if hasattr(cd, "_zero_globals") else _zero_globals(cd)
        values: dict = {}
        for s in self.sets:
            values.update(s(cd) if callable(s) else s)
        blk = lp.aligned_zeros(cd.gsize)
        fields = lp.field_map(list(cd.global_fields.values()))
        ctx = lp.PackContext("set")
        packed = lp.pack_block(fields, cd.gsize, values, ctx, [])
        cd._keep_globals = packed
        return packed.ctypes.data

    def _globals_array(self, cd: CallData):
        """The packed globals block of `.set` values as a numpy array (devices that copy it)."""
        values: dict = {}
        for s in self.sets:
            values.update(s(cd) if callable(s) else s)
        fields = lp.field_map(list(cd.global_fields.values()))
        return lp.pack_block(fields, cd.gsize, values, lp.PackContext("set"), [])

    def _convert_return(self, ret, cd: CallData):
        mode = self.return_type_mode
        if mode is None:
            return ret
        if mode == "numpy":
            if isinstance(ret, Tensor):
                if ret.dtype.scalar is None and struct_np_dtype(ret.dtype) is None:
                    raise ValueError(f"Numpy values can only be automatically returned from scalar, vector, matrix "
                                     f"or array types, not {ret.dtype.name}")
                return ret.to_numpy()
            return np.asarray(_to_plain(ret))
        if mode in ("tensor", "ndbuffer"):
            if not isinstance(ret, Tensor):
                a = np.asarray(_to_plain(ret))
                ret = Tensor.from_numpy(cd.device, a.reshape(1) if a.ndim == 0 else a)
            if mode == "ndbuffer" and not isinstance(ret, NDBuffer):
                ret = NDBuffer._of(ret.detach() if ret.grad_in is not None or ret.grad_out is not None else ret)
            return ret
        return ret


def _to_plain(v):
    if hasattr(v, "to_numpy"):
        return v.to_numpy()
    return v


def _zero_globals(cd):
    z = lp.aligned_zeros(cd.gsize)
    cd._zero_globals_arr = z
    cd._zero_globals = z.ctypes.data
    return cd._zero_globals


def _map_key(maps):
    if maps is None:
        return None
    pos, kw = maps
    return (tuple(_one_map_key(m) for m in pos), tuple(sorted((k, _one_map_key(m)) for k, m in kw.items())))


def _one_map_key(m):
    if isinstance(m, (tuple, str)) or m is None:
        return m
    return repr(m)


class Function(FunctionNode):
    """A Slang function (all overloads of a name, or one explicit specialisation) of a Module."""

    def __init__(self, module, name: str, overloads: list, explicit_generics: Optional[dict] = None,
                 display_name: Optional[str] = None, struct=None):
        self.module = module
        self.name = display_name or name
        self.slang_name = name
        self.overloads = overloads                # list[FuncInfo]
        self.explicit_generics = explicit_generics or {}
        self.struct = struct
        self._node_caches: dict = {}
        super().__init__(self)

    def __repr__(self):
        return f"Function(name='{self.name}', overloads={len(self.overloads)})"
