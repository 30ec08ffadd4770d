"""What the compiler tells the runtime about a compiled program: the C ABI and memory layouts.

Contract between the compiler (producer) and the runtime (consumer):

* The generated C++ defines, for every entry point `E`, an exported function

      extern "C" void <EntryPointInfo.symbol>(void* globals, void* params,
                                              const uint32_t group_count[3],
                                              uint32_t group_begin, uint32_t group_end,
                                              void* error_record);

  that runs the thread groups whose *linear* index g = gx + X*(gy + Y*gz) (X, Y from
  group_count) lies in [group_begin, group_end), every thread of each group in turn.
  `error_record` (may be null) receives the dispatch's first failed check
  (runtime/kernel_errors.py ErrorRecord; its `site` indexes ProgramReflection.error_sites).
  The runtime splits [0, X*Y*Z) across worker threads; any split is valid.
* `globals` points to a block of `ProgramReflection.globals_size` bytes laid out as
  `ProgramReflection.globals` says (every global `uniform`/buffer/pointer/cbuffer);
  `params` to a block of `EntryPointInfo.params_size` bytes for the entry point's
  `uniform` parameters. Static consts and groupshared variables are not in either block.
* Layouts are C natural layout (the generated structs match them, checked by
  static_assert in the generated code):
    scalar      size = align = its width (bool: 1 byte)
    vector<T,N> N consecutive T, align of T            (float3: size 12, align 4)
    matrix<T,R,C> R rows of vector<T,C>                (row-major)
    T[N]        N elements, stride = element size
    struct      fields in order, each at its alignment; size rounded up to the struct's align
    buffer      {void* data; uint64 count}  16 bytes, align 8; count in *elements* of the
                declared element type (bytes for (RW)ByteAddressBuffer)
    pointer     8 bytes (a device address: on the CPU a plain host address)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional
import hashlib

# CUDA: the module symbol of the `__constant__` globals block (emit/cuda.py documents the kernel ABI).
# Here rather than in emit/cuda.py so the runtime can load a cached cubin without importing the emitter.
CUDA_GLOBALS_SYMBOL = "sj_globals"


@dataclass
class TypeLayout:
    kind: str                 # "scalar" "vector" "matrix" "array" "struct" "buffer" "pointer"
    name: str                 # Slang spelling, for messages: "float3", "RWStructuredBuffer<int>", "MyStruct"
    size: int
    align: int
    scalar: Optional[str] = None   # numpy dtype name of the element for scalar/vector/matrix:
                                   # "bool" "int8" "int16" "int32" "int64" "uint8" ... "float16" "float32" "float64"
    count: int = 0                 # vector length, array length, matrix rows
    cols: int = 0                  # matrix columns
    fields: list["FieldLayout"] = field(default_factory=list)   # struct
    element: Optional["TypeLayout"] = None   # array / buffer / pointer target (None: void* / byte address)
    writable: bool = False         # buffers: RW (unordered access) vs read-only
    buffer_kind: str = ""          # "structured" or "byteaddress" for buffers


@dataclass
class FieldLayout:
    name: str
    offset: int
    layout: TypeLayout


@dataclass
class EntryPointInfo:
    name: str
    symbol: str
    numthreads: tuple[int, int, int]
    params: list[FieldLayout] = field(default_factory=list)   # `uniform` entry-point parameters
    params_size: int = 0
    # CUDA: the kernel runs groups in turn (grid-stride over blockIdx.x) and takes the group counts
    # as a second parameter (emit/cuda.py coarse_kernel); the runtime picks the grid size.
    grid_stride: bool = False
    # CUDA: bytes of dynamic shared memory the kernel needs at launch (coarsened kernels that keep
    # their gradient slots in shared memory); the runtime raises the kernel's limit when over 48 KB.
    dynamic_shared: int = 0
    # ... only on GPUs of this compute capability (x10) or newer (0: all); older ones run the kernel's
    # fallback, which needs none (tensor-core gradient slots need sm_80).
    dynamic_shared_arch: int = 0
    # CUDA: a coarsened kernel that combines its N gradient slots across blocks takes a scratch buffer
    # (emit/cuda.py ABI): N here, else 0.
    grid_slots: int = 0


@dataclass
class ProgramReflection:
    globals: list[FieldLayout] = field(default_factory=list)
    globals_size: int = 0
    entry_points: dict[str, EntryPointInfo] = field(default_factory=dict)
    # The failure sites of the generated code's checks, "file:line: what", indexed by the error record's
    # `site` (runtime/kernel_errors.py).
    error_sites: list[str] = field(default_factory=list)
    # The generated code reads slangpy's CallShapeInfo statics (`_sj_csi_*`, slang/slangpy.slang), which the
    # functional API's calls set (functional/binding.py): known without reading the source.
    uses_call_shape: bool = False


@dataclass
class CompiledProgram:
    """The compiler's output for one program (module + entry points) and one target."""
    source: str                    # C++ (target "cpp") or CUDA C++ (target "cuda")
    target: str
    reflection: ProgramReflection
    timings: dict[str, float] = field(default_factory=dict)   # seconds per front-end stage

    def source_sha256(self) -> bytes:
        """sha256 of `source`, computed once and kept with the program (the front-end cache stores it), so
        a warm start finds its cubin without hashing the ~170 KB of CUDA again."""
        d = self.__dict__.get("_source_sha256")
        if d is None:
            d = self._source_sha256 = hashlib.sha256(self.source.encode("utf-8", "surrogatepass")).digest()
        return d
