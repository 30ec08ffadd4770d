"""The KernelBuilder that assembles a generated kernel's text, and the access paths of a differential type's
floats (used by the leaves' gradient stores).  See calldata.py for the overall model."""
from __future__ import annotations

from . import typeview as S
from .errors import KernelGenException


# ----------------------------------------------------------------------------------------- kernel builder


class KernelBuilder:
    """Writes the per-element code of a generated kernel.

    A thread handles `unroll` call elements (see CallData._codegen).  Each element is written in two parts: the
    load phase (every read of an argument, into locals) and the body (the call, then the stores).  The kernel
    puts the load phases of all its elements before the first body, so a thread's reads are in flight together
    (a store could alias a later read, so the compiler may not hoist reads over it on its own).  Names local to
    an element end with its suffix (`kb.name`, `kb.flat`, `kb.cid`; `kb.tmp` names are unique anyway).

    In the `linear` variant every strided view is addressed as `_o + flat * _cs[cd - 1]` (the host packs the one
    linear stride there when each view's call strides are a multiple of the call shape's row-major strides)
    instead of splitting the flat index into per-dimension indices."""

    def __init__(self, cd: int, linear: bool = False, unit=None):
        self.cd = cd
        self.linear = linear
        # The unit-stride variant (CPU, CallData._unit_kernel): every strided view is `_o + flat` with a 64-bit
        # flat index (an affine address the C++ compiler vectorises across threads), and each `_goa` uniform
        # is the constant of this call ({uniform name: value}).
        self.unit = unit
        self.ity = "int64_t" if unit is not None else "int"     # the type of element offsets
        self.lines: list[str] = []
        self._n = 0
        self.indent = "    "
        self.sfx = ""
        self._has_cid = False
        self.load_lines: list[str] = []
        self.body_lines: list[str] = []
        self.tid = None                 # the thread index, where it is not the flat call index

    def tmp(self) -> str:
        self._n += 1
        return f"_t{self._n}"

    def line(self, s: str):
        self.lines.append(self.indent + s)

    # -- elements

    def start_element(self, sfx: str):
        self.sfx = sfx
        self._has_cid = False
        self.load_lines, self.body_lines = [], []
        self.lines = self.load_lines

    def start_body(self):
        self.lines = self.body_lines

    def name(self, base: str) -> str:
        return base + self.sfx

    @property
    def flat(self) -> str:
        """The element's flat call index (row-major over the call shape)."""
        return f"_sj_flat{self.sfx}"

    def cid(self, c: int) -> str:
        """The element's index along call dimension c (split from the flat index on first use)."""
        if self.cd == 1:
            return self.flat
        cid = f"_sj_cid{self.sfx}"
        if not self._has_cid:
            self._has_cid = True
            self.line(f"int {cid}[{self.cd}];")
            self.line(f"int _sj_rem{self.sfx} = {self.flat};")
            for c2 in reversed(range(self.cd)):
                self.line(f"{cid}[{c2}] = _sj_rem{self.sfx} % _sj_cs[{c2}];")
                if c2:
                    self.line(f"_sj_rem{self.sfx} = _sj_rem{self.sfx} / _sj_cs[{c2}];")
        return f"{cid}[{c}]"

    def offset(self, p: str, cd: int) -> str:
        """Element offset of a strided view with uniforms `{p}o` and `{p}cs[cd]` (cd = the call's dims)."""
        if not cd:
            return f"{p}o"
        if self.unit is not None:
            return f"{p}o + {self.flat}"
        if self.linear or cd == 1:
            return f"{p}o + {self.flat} * {p}cs[{cd - 1}]"
        return f"{p}o" + "".join(f" + {self.cid(c)} * {p}cs[{c}]" for c in range(cd))


    def goa(self, p: str) -> str:
        """A gradient output's accumulation mode `{p}a`: the uniform, or its value in the unit variant."""
        if self.unit is not None and f"{p}a" in self.unit:
            return str(self.unit[f"{p}a"])
        return f"{p}a"


def _float_paths(t: S.SType, prefix: str = "") -> list:
    """Access paths (".a.b[1].x") of every floating-point scalar inside a differential type."""
    if isinstance(t, S.ScalarT):
        return [prefix] if t.skind == "f" else []
    if isinstance(t, S.VectorT):
        return [f"{prefix}.{c}" for c in "xyzw"[:t.n]] if t.elem.skind == "f" else []
    if isinstance(t, S.MatrixT):
        return [f"{prefix}[{r}].{c}" for r in range(t.rows) for c in "xyzw"[:t.cols]] if t.elem.skind == "f" else []
    if isinstance(t, S.ArrayT):
        return [q for i in range(t.n) for q in _float_paths(t.elem, f"{prefix}[{i}]")]
    if isinstance(t, S.StructT):
        return [q for n, ft in t.field_list() for q in _float_paths(ft, f"{prefix}.{n}")]
    raise KernelGenException(f"Exception in kernel generation: cannot accumulate a gradient of type {t.name}")
