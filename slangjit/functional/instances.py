"""Struct instances: `InstanceList` (a Tensor of structs or a dict of per-field containers, SOA) and
`InstanceTensor` (a Tensor of a struct type)."""
from __future__ import annotations

from typing import Any, Optional

from ..tensor import Tensor


class InstanceList:
    """Binds `data` as `this` for the struct's methods: `il.method(...)` calls `Struct.method(data, ...)`."""

    def __init__(self, struct, data: Any = None):
        object.__setattr__(self, "_struct", struct.as_struct() if hasattr(struct, "as_struct") else struct)
        object.__setattr__(self, "_data", data if data is not None else {})
        object.__setattr__(self, "_loaded_methods", {})

    @property
    def struct(self):
        return self._struct

    def get_this(self) -> Any:
        return self._data

    def update_this(self, value: Any) -> None:
        pass

    def construct(self, *args, **kwargs):
        return self._struct.find_method("__init")(*args, _result=self._data, **kwargs)

    def __getattr__(self, name: str):
        d = object.__getattribute__(self, "_data")
        if isinstance(d, dict) and name in d:
            return d[name]
        st = object.__getattribute__(self, "_struct")
        f = st.find_method(name)
        if f is not None:
            return f.bind(self)
        raise AttributeError(f"Struct '{st.name}' has no method or sub-type named '{name}'")

    def __setattr__(self, name: str, value: Any):
        st = object.__getattribute__(self, "_struct")
        d = object.__getattribute__(self, "_data")
        if isinstance(d, dict) and name in st.fields:
            d[name] = value
        else:
            object.__setattr__(self, name, value)


class InstanceTensor(InstanceList):
    """An InstanceList whose data is a Tensor of the struct type, allocated with `shape`."""

    def __init__(self, struct, shape: tuple, data: Optional[Any] = None):
        st = struct.as_struct() if hasattr(struct, "as_struct") else struct
        if data is None:
            data = Tensor.empty(st.device, shape=shape, dtype=st)
        super().__init__(st, data)

    @property
    def shape(self):
        return self._data.shape

    @property
    def tensor(self):
        return self._data

    def to_numpy(self):
        return self._data.to_numpy()

    def copy_from_numpy(self, data) -> None:
        self._data.copy_from_numpy(data)


class InstanceDifferentiableTensor(InstanceTensor):
    """An InstanceTensor whose tensor carries gradients (`.grad`), for `.bwds` calls of the struct's
    differentiable methods (SlangPy's experimental InstanceDifferentiableBuffer)."""

    def __init__(self, struct, shape: tuple, data: Optional[Any] = None):
        st = struct.as_struct() if hasattr(struct, "as_struct") else struct
        if data is None:
            data = Tensor.zeros(st.device, shape=shape, dtype=st).with_grads(zero=True)
        elif data.grad_out is None and data.grad_in is None:
            data = data.with_grads(zero=True)
        super().__init__(st, shape, data)

    @property
    def buffer(self) -> Tensor:
        return self._data

    @property
    def grad(self) -> Tensor:
        return self._data.grad


InstanceDifferentiableBuffer = InstanceDifferentiableTensor

InstanceBuffer = InstanceTensor          # SlangPy's name for an instance list over a buffer of structs
