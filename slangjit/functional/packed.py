"""`spy.PackedArg` / `spy.pack(module, value)`: an argument whose value is packed once, when it is made,
instead of at every call.  A list of struct dicts (`[{"_type": "Val", "x": 1}, ...]`) becomes a tensor of
that struct (one call dimension, as SlangPy vectorizes it; fields that are tensors are packed as tensor
views); any other value is passed as it is.  The call binds the packed value through the instance protocol
(get_this / update_this), so it is marshalled like the value it holds."""
from __future__ import annotations

from typing import Any

from ..tensor import Tensor


class PackedArg:
    def __init__(self, module, value: Any):
        self.module = module
        self.value = value
        self.packed = _pack(module, value)

    def get_this(self) -> Any:
        return self.packed

    def update_this(self, value: Any) -> None:
        pass

    def __repr__(self):
        return f"PackedArg({self.value!r})"


def pack(module, value: Any) -> PackedArg:
    return PackedArg(module, value)


def _struct_of(module, d: dict):
    name = d.get("_type")
    if not isinstance(name, str):
        return None
    st = module.find_struct(name)
    if st is None:
        raise ValueError(f"pack: module '{module.name}' has no type named '{name}'")
    return st


def _plain(v):
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items() if k != "_type"}
    if isinstance(v, Tensor):
        return v.uniforms()
    return v


def _pack(module, value):
    if isinstance(value, (list, tuple)) and value and all(isinstance(x, dict) for x in value):
        sts = {id(getattr(_struct_of(module, x), "_sj_stype", None)) for x in value}
        st = _struct_of(module, value[0])
        if st is None or len(sts) != 1:
            raise ValueError("pack: a list of dicts needs the same '_type' (a struct of the module) in every "
                             "element")
        t = Tensor.empty(module.device, shape=(len(value),), dtype=st)
        c = t.cursor()
        for i, x in enumerate(value):
            c[i].write(_plain(x))
        c.apply()
        return t
    return value
