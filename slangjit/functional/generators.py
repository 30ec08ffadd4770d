"""Generator arguments: values computed per thread in the kernel (`call_id`, `thread_id`, `grid`,
`wang_hash`, `rand_float`)."""
from __future__ import annotations

from typing import Optional, Sequence, Union

import numpy as np


def _wang_hash_py(s: int) -> int:
    s &= 0xFFFFFFFF
    s = (s ^ 61) ^ (s >> 16)
    s = (s * 9) & 0xFFFFFFFF
    s = s ^ (s >> 4)
    s = (s * 0x27D4EB2D) & 0xFFFFFFFF
    s = s ^ (s >> 15)
    return s & 0xFFFFFFFF


def calc_wang_hash_numpy(seeds):
    """The wang hash of each element of a uint32 array (what `wang_hash` computes per thread), in numpy."""
    s = np.asarray(seeds).astype(np.uint32)
    with np.errstate(over="ignore"):
        s = (s ^ np.uint32(61)) ^ (s >> np.uint32(16))
        s = s * np.uint32(9)
        s = s ^ (s >> np.uint32(4))
        s = s * np.uint32(0x27D4EB2D)
        s = s ^ (s >> np.uint32(15))
    return s


class Generator:
    _sj_generator = True
    kind = ""
    dims = -1

    def sig(self):
        return (type(self).__name__, self.dims)


class CallIdArg(Generator):
    kind = "call_id"

    def __init__(self, dims: int = -1):
        self.dims = dims


class ThreadIdArg(Generator):
    kind = "thread_id"

    def __init__(self, dims: int = -1):
        self.dims = dims


class GridArg(Generator):
    kind = "grid"

    def __init__(self, shape: Union[int, Sequence[int]], offset: Optional[Sequence[int]] = None,
                 stride: Optional[Sequence[int]] = None):
        if isinstance(shape, int):
            shape = (-1,) * shape
        self.shape = tuple(int(s) for s in shape)
        self.dims = len(self.shape)
        self.offset = tuple(offset) if offset is not None else (0,) * self.dims
        self.stride = tuple(stride) if stride is not None else (1,) * self.dims
        if len(self.stride) != self.dims:
            raise ValueError(f"grid: stride has {len(self.stride)} dimensions, shape has {self.dims}")
        if len(self.offset) != self.dims:
            raise ValueError(f"grid: offset has {len(self.offset)} dimensions, shape has {self.dims}")

    def sig(self):
        return ("GridArg", self.dims)


class WangHashArg(Generator):
    kind = "wang_hash"

    def __init__(self, dims: int = -1, seed: int = 2640457667, warmup: int = 0, hash_seed: bool = True):
        self.dims = dims
        self.seed = _wang_hash_py(seed) if hash_seed else seed & 0xFFFFFFFF
        self.warmup = int(warmup)

    def sig(self):
        return ("WangHashArg",)


class RandFloatArg(Generator):
    kind = "rand_float"

    def __init__(self, min: float = 0.0, max: float = 1.0, dim: int = -1, seed: int = 2640457667, warmup: int = 0,
                 hash_seed: bool = True):
        self.min, self.max = float(min), float(max)
        self.dims = dim
        self.seed = _wang_hash_py(seed) if hash_seed else seed & 0xFFFFFFFF
        self.warmup = int(warmup)

    def sig(self):
        return ("RandFloatArg",)


def call_id(dims: int = -1):
    if isinstance(dims, tuple):
        return GridArg(dims)
    return CallIdArg(dims)


def thread_id(dims: int = -1) -> ThreadIdArg:
    return ThreadIdArg(dims)


def grid(shape, offset=None, stride=None) -> GridArg:
    return GridArg(shape, offset, stride)


def wang_hash(dim: int = -1, seed: int = 2640457667, warmup: int = 0, hash_seed: bool = True) -> WangHashArg:
    return WangHashArg(dim, seed, warmup, hash_seed)


def rand_float(min: float = 0.0, max: float = 1.0, dim: int = -1, seed: int = 2640457667, warmup: int = 0,
               hash_seed: bool = True) -> RandFloatArg:
    # SlangPy's factory drops warmup and hash_seed (quirk kept)
    return RandFloatArg(min, max, dim, seed)
