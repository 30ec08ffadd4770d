"""Views of a call: a snapshot of an IThis argument (`get_this()` asked once per call, as SlangPy) and the debug
view of a call's bindings (`CallData.debug_only_bindings`, SlangPy's names)."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import typeview as S
from .binder import _all_leaves
from .leaves import ContainerLeaf, StructLeaf


def _is_this(v) -> bool:
    return hasattr(v, "get_this") and not isinstance(v, (dict, list, tuple, Tensor, np.ndarray, _Once))


class _Once:
    """An IThis object whose get_this() was called once: later calls return that value; update_this goes on."""
    __slots__ = ("obj", "value")

    def __init__(self, obj):
        if isinstance(obj, _Once):
            obj = obj.obj
        self.obj = obj
        self.value = obj.get_this()

    def get_this(self):
        return self.value

    def update_this(self, value) -> None:
        f = getattr(self.obj, "update_this", None)         # optional: a read-only IThis has none
        if f is not None:
            f(value)


# ----------------------------------------------------------------------------------------- debug view


class _Mapping:
    def __init__(self, t: tuple):
        self._t = tuple(t)

    def as_tuple(self) -> tuple:
        return self._t

    def __iter__(self):
        return iter(self._t)

    def __len__(self):
        return len(self._t)

    def __eq__(self, other):
        return tuple(other) == self._t if isinstance(other, (tuple, list, _Mapping)) else NotImplemented

    def __hash__(self):
        return hash(self._t)

    def __repr__(self):
        return f"Shape{self._t}"


class _DebugType:
    def __init__(self, t: S.SType):
        self.name = t.name
        if isinstance(t, S.VectorT):
            self.full_name = f"vector<{t.elem.name},{t.n}>"
        elif isinstance(t, S.MatrixT):
            self.full_name = f"matrix<{t.elem.name},{t.rows},{t.cols}>"
        else:
            self.full_name = t.name

    def __repr__(self):
        return self.full_name


class DebugBinding:
    def __init__(self, name: str, ptype: S.SType, leaf):
        self.variable_name = name
        self.param_type = _DebugType(ptype)
        lvs = [lf for lf in _all_leaves(leaf)] if leaf is not None else []
        maps = [lf.mapping for lf in lvs if lf.mapping is not None]
        self.vector_mapping = _Mapping(max(maps, key=len) if maps else ())
        if isinstance(leaf, ContainerLeaf) and leaf.convert:
            vt = leaf.dtype
        elif isinstance(getattr(leaf, "value_type", None), S.SType):
            vt = leaf.value_type       # a Python value: its own type (the kernel converts it), as SlangPy reports
        else:
            vt = ptype
        self.vector_type = _DebugType(vt)
        m = self.vector_mapping.as_tuple()
        # the call dimensions the argument reaches (an argument mapped to dimension 1 only has 2)
        self.call_dimensionality = max(m) + 1 if m else 0
        self.children = None
        if isinstance(leaf, StructLeaf):
            fields = ptype.fields if isinstance(ptype, S.StructT) else {}
            self.children = {k: DebugBinding(f"{name}.{k}", fields.get(k, c.ptype), c) for k, c in leaf.children}

    def get_input_list(self, out: list) -> list:
        """Append the leaves of this binding (itself, or the fields of a dict) to `out`."""
        if self.children:
            for c in self.children.values():
                c.get_input_list(out)
        else:
            out.append(self)
        return out

    def __repr__(self):
        return f"DebugBinding({self.variable_name}: {self.vector_type}, {self.vector_mapping})"


class DebugBindings:
    def __init__(self, cd):
        self.args: list = []
        self.kwargs: dict = {}
        for b, src in zip(cd.bound, cd.sources):
            if b.pname == "this" and cd.cand.has_this and b.index == 0:
                continue
            db = DebugBinding(b.pname, b.ptype, b.leaf)
            if src[0] == "pos":
                self.args.append(db)
            else:
                self.kwargs[src[1]] = db
        if cd.result is not None:
            self.kwargs["_result"] = DebugBinding("_result", cd.result.ptype, cd.result.leaf)
