"""The device API both backends share (the SlangPy-compatible compute API):

    device = create_device(type=DeviceType.cpu, include_paths=[...])      # runtime/device.py
    program = device.load_program("kernel.slang", ["computeMain"])
    kernel = device.create_compute_kernel(program)
    buf = device.create_buffer(element_count=n, struct_size=4, usage=BufferUsage.unordered_access)
    kernel.dispatch(thread_count=[n, 1, 1], vars={"outputBuffer": buf}, count=n)
    buf.to_numpy().view(np.float32)

Here: the enums, `Buffer` (the buffer API; its implementation is host memory, which the CPU device and
host-memory wrappers use; cuda.py CudaBuffer overrides it), reflection cursors, modules and programs
(compiled by `slangjit.compiler.compile_program` with the device's target and pipeline options),
`KernelBase` (entry lookup, block layouts, argument binding and validation) and the `Device` base.
The CPU device is cpu.py, the CUDA device cuda.py; device.py picks one.  The C ABI of the generated
entry points and the block layouts are described in `slangjit/compiler/reflection.py`.
"""
from __future__ import annotations

import dataclasses
import operator
import os
import warnings
from enum import IntEnum, IntFlag
from typing import Any, Optional, Sequence

import numpy as np

from . import textures as _textures
from .. import compiler             # compiler.compile_program looked up per call (tests stand in for it)
from ..compiler.passes.options import DEFAULT_OPTIONS, PipelineOptions
from ..compiler.source import CompileError
from ..compiler.reflection import CompiledProgram, EntryPointInfo, FieldLayout, ProgramReflection, TypeLayout
from . import layout_pack as _lp
from . import commands


# ------------------------------------------------------------------------------------------ enums


class DeviceType(IntEnum):
    automatic = 0
    d3d12 = 2
    vulkan = 3
    metal = 4
    cpu = 5
    cuda = 6
    wgpu = 7


class BufferUsage(IntFlag):
    none = 0
    vertex_buffer = 1
    index_buffer = 2
    constant_buffer = 4
    shader_resource = 8
    unordered_access = 16
    indirect_argument = 32
    copy_source = 64
    copy_destination = 128
    acceleration_structure = 256
    acceleration_structure_build_input = 512
    shader_table = 1024
    shared = 2048


class MemoryType(IntEnum):
    device_local = 0
    upload = 1
    read_back = 2


class ResourceState(IntEnum):
    undefined = 0
    general = 1
    vertex_buffer = 2
    index_buffer = 3
    constant_buffer = 4
    stream_output = 5
    shader_resource = 6
    unordered_access = 7
    render_target = 8
    depth_read = 9
    depth_write = 10
    present = 11
    indirect_argument = 12
    copy_source = 13
    copy_destination = 14
    resolve_source = 15
    resolve_destination = 16
    acceleration_structure = 17
    acceleration_structure_build_input = 18


class SlangWarning(UserWarning):
    """A warning from the Slang compiler (e.g. an implicit vector truncation)."""


class SlangModuleNotFoundError(FileNotFoundError):
    """A Slang module could not be found; the message lists the paths tried."""

    def __str__(self) -> str:   # FileNotFoundError's default formatting would show a tuple
        return self.args[0] if self.args else ""


# ------------------------------------------------------------------------------------------ buffers


class BufferDesc:
    def __init__(self, size: int, struct_size: int, usage: BufferUsage, memory_type: MemoryType, format: Any,
                 default_state: Any, label: str):
        self.size = size
        self.struct_size = struct_size
        self.usage = usage
        self.memory_type = memory_type
        self.format = format
        self.default_state = default_state
        self.label = label
        self.element_count = size // struct_size if struct_size else 0

    def __repr__(self) -> str:
        return (f"BufferDesc(size={self.size}, struct_size={self.struct_size}, usage={self.usage!r}, "
                f"memory_type={self.memory_type!r}, label={self.label!r})")


class Buffer:
    """Device memory; on the CPU a 64-byte aligned, zero-initialised numpy uint8 array."""

    _sj_buffer = True

    def __init__(self, device: "Device", desc: BufferDesc):
        self.device = device
        self.desc = desc
        self._mem = _lp.aligned_zeros(desc.size)
        self._addr = int(self._mem.ctypes.data)

    size = property(lambda self: self.desc.size)
    struct_size = property(lambda self: self.desc.struct_size)
    usage = property(lambda self: self.desc.usage)
    memory_type = property(lambda self: self.desc.memory_type)
    format = property(lambda self: self.desc.format)
    label = property(lambda self: self.desc.label)

    @property
    def element_count(self) -> int:
        return self.desc.element_count

    @property
    def device_address(self) -> int:
        return self._addr

    def to_numpy(self) -> np.ndarray:
        """A copy of the contents as raw bytes (uint8, length `size`)."""
        return self._mem[: self.desc.size].copy()

    def copy_from_numpy(self, data) -> None:
        a = np.ascontiguousarray(_lp.native(np.asarray(data)))
        raw = a.reshape(-1).view(np.uint8)
        if raw.size > self.desc.size:
            raise ValueError(f"numpy array is larger than the buffer ({raw.size} > {self.desc.size})")
        self._mem[: raw.size] = raw

    # sgl spelling used by some tests
    def set_data(self, data, offset: int = 0) -> None:
        raw = np.ascontiguousarray(_lp.native(np.asarray(data))).reshape(-1).view(np.uint8)
        if offset < 0 or offset + raw.size > self.desc.size:
            raise ValueError("set_data: upload would exceed the size of the destination buffer")
        self._mem[offset: offset + raw.size] = raw

    def __repr__(self) -> str:
        return f"Buffer(size={self.size}, struct_size={self.struct_size}, usage={self.usage!r})"


# ------------------------------------------------------------------------------------------ reflection


class ReflectionCursor:
    """Minimal stand-in for SlangPy's ReflectionCursor: attribute / item access by field name."""

    def __init__(self, layout: Optional[TypeLayout], fields: Optional[Sequence[FieldLayout]] = None, name: str = ""):
        self.type_layout = layout
        self._fields = {f.name: f for f in (fields if fields is not None else (layout.fields if layout else []))}
        self.name = name

    @property
    def fields(self) -> list[str]:
        return list(self._fields)

    def has_field(self, name: str) -> bool:
        return name in self._fields

    def __getitem__(self, name: str) -> "ReflectionCursor":
        f = self._fields.get(name)
        if f is None:
            raise KeyError(f"no field '{name}' (fields: {', '.join(self._fields) or 'none'})")
        return ReflectionCursor(f.layout, None, name)

    def __getattr__(self, name: str) -> "ReflectionCursor":
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def __repr__(self) -> str:
        t = self.type_layout.name if self.type_layout is not None else "<root>"
        return f"ReflectionCursor({self.name!r}: {t})"


def _stride_of(layout: Any) -> int:
    if isinstance(layout, ReflectionCursor):
        layout = layout.type_layout
    if not isinstance(layout, TypeLayout):
        stride = getattr(layout, "stride", None) or getattr(layout, "size", None)
        if isinstance(stride, int) and stride > 0:
            return stride
        raise TypeError(f"create_buffer: resource_type_layout must come from kernel.reflection, got {type(layout).__name__}")
    if layout.kind in ("buffer", "pointer", "array"):
        if layout.kind == "buffer" and (layout.buffer_kind == "byteaddress" or layout.element is None):
            return 1
        if layout.element is None:
            return 1
        return max(1, layout.element.size)
    return max(1, layout.size)


# ------------------------------------------------------------------------------------------ modules / programs


class TypeConformance:
    """`interface_type` is implemented by `type` (names, or objects with a name): the interface's dynamic
    values are of the types given (`id`: the value's tag, -1 = the next free one)."""

    def __init__(self, interface_type, type, id: int = -1):
        self.interface_name = _conformance_name(interface_type, "interface_type")
        self.type_name = _conformance_name(type, "type")
        if isinstance(id, bool) or not isinstance(id, int):
            raise TypeError(f"TypeConformance: id must be an int, got {id!r}")
        self.id = id

    interface_type = property(lambda self: self.interface_name)
    type = property(lambda self: self.type_name)

    def __repr__(self) -> str:
        return f"TypeConformance({self.interface_name!r}, {self.type_name!r}, {self.id})"


def _conformance_name(t, what: str) -> str:
    if isinstance(t, str):
        return t
    for a in ("full_name", "name"):
        n = getattr(t, a, None)
        if isinstance(n, str):
            return n
    raise TypeError(f"TypeConformance: {what} must be a type name, got {t!r}")


def normalize_conformances(tcs) -> tuple:
    return _normalize_conformances(tcs)


def _normalize_conformances(tcs) -> tuple:
    out = []
    for tc in tcs or ():
        if isinstance(tc, (tuple, list)):
            t = tuple(tc)
            if len(t) == 2:
                t = (t[0], t[1], -1)
            out.append(t)
        else:
            out.append((getattr(tc, "interface_name"), getattr(tc, "type_name"), getattr(tc, "id", -1)))
    return tuple(out)


class EntryPoint:
    def __init__(self, module: "SlangModule", name: str, type_conformances=()):
        self.module = module
        self.name = name
        self.type_conformances = _normalize_conformances(type_conformances)

    def __repr__(self) -> str:
        return f"EntryPoint({self.name!r})"


_MODULE_LAYOUT_PROVIDER: list = []


def set_module_layout_provider(provider) -> None:
    """Register the function that builds a SlangModule's `layout` (the functional layer, stage 10, registers
    its declaration reflection when it is imported; the runtime cannot import it)."""
    _MODULE_LAYOUT_PROVIDER[:] = [provider]


class SlangModule:
    def __init__(self, device: "Device", name: str, path: Optional[str], text: Optional[str]):
        self.device = device
        self.name = name
        self.path = path
        self.text = text

    @property
    def layout(self):
        """Reflection of the module's declarations (SlangPy's `slang_module.layout`): the functional API's
        ModuleLayout (`find_type_by_name`, `find_function_by_name`, ...), built once."""
        lay = self.__dict__.get("_sj_layout")
        if lay is None:
            if not _MODULE_LAYOUT_PROVIDER:
                raise AttributeError("SlangModule.layout needs slangjit's functional API (import slangjit)")
            lay = self.__dict__["_sj_layout"] = _MODULE_LAYOUT_PROVIDER[0](self)
        return lay

    def entry_point(self, name: str, type_conformances=()) -> EntryPoint:
        return EntryPoint(self, name, type_conformances)

    def _source_spec(self):
        return compiler.SourceSpec(path=self.path, text=self.text, name=self.name)

    def __repr__(self) -> str:
        return f"SlangModule({self.name!r}, path={self.path!r})"


class ShaderProgram:
    """Modules + entry point names, compiled by the front end to C++ when created."""

    def __init__(self, device: "Device", modules: list[SlangModule], entry_points: list[EntryPoint],
                 compile_options: Optional[PipelineOptions] = None):
        self.device = device
        self.modules = modules
        self.entry_points = entry_points
        self.entry_point_names = [e.name for e in entry_points]
        self.compiled: CompiledProgram = device._compile(modules, entry_points, compile_options)

    @property
    def reflection(self) -> ProgramReflection:
        return self.compiled.reflection

    def __repr__(self) -> str:
        return f"ShaderProgram(modules={[m.name for m in self.modules]}, entry_points={self.entry_point_names})"


# ------------------------------------------------------------------------------------------ checked mode

def device_compile_options(device) -> PipelineOptions:
    """The options generated kernels (the functional API) compile with on `device`: the defaults, checked
    when the device is."""
    return CHECKED_OPTIONS if getattr(device, "checked", False) else DEFAULT_OPTIONS


CHECKED_OPTIONS = PipelineOptions(checked=True)


def checked_from_env() -> bool:
    """$SLANGJIT_CHECKED (read when a device is created): anything but empty / 0 / false / no / off."""
    return os.environ.get("SLANGJIT_CHECKED", "").strip().lower() not in ("", "0", "false", "no", "off")


# ------------------------------------------------------------------------------------------ kernels

_EXTRA_DISPATCH_KWARGS = ("queue", "cuda_stream", "query_pool", "query_index_before", "query_index_after")


def _count_int(v: Any, tc: Any) -> int:
    """One thread count component: an integer (int, numpy integer, anything with __index__), never a
    string, float or bool (`"12"` is not [1, 2], 7.9 is not 7)."""
    if isinstance(v, (bool, np.bool_, str, bytes, float, np.floating)):
        raise TypeError(f"dispatch: thread_count must be 1 to 3 non-negative integers (e.g. [N, 1, 1]), got {tc!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise TypeError(f"dispatch: thread_count must be 1 to 3 non-negative integers (e.g. [N, 1, 1]), "
                        f"got {tc!r}") from None


def thread_count3(tc: Any) -> tuple[int, int, int]:
    """A dispatch's thread count as (x, y, z): 1 to 3 integers >= 0, or an object with .x/.y/.z."""
    if isinstance(tc, np.ndarray) and tc.ndim == 0:
        tc = tc.item()
    if isinstance(tc, (str, bytes, bool, float, np.floating)) or tc is None:
        vals = [_count_int(tc, tc)]
    elif isinstance(tc, (int, np.integer)):
        vals = [int(tc)]
    elif hasattr(tc, "x") and not isinstance(tc, (list, tuple, np.ndarray)):
        vals = [_count_int(getattr(tc, c, 1), tc) for c in "xyz"]
    else:
        try:
            items = list(tc)
        except TypeError:
            raise TypeError(f"dispatch: thread_count must be 1 to 3 non-negative integers (e.g. [N, 1, 1]), "
                            f"got {tc!r}") from None
        vals = [_count_int(v, tc) for v in items]
    if not 1 <= len(vals) <= 3:
        raise ValueError(f"dispatch: thread_count must have 1 to 3 components, got {len(vals)}")
    if any(v < 0 for v in vals):
        raise ValueError(f"dispatch: thread_count must not be negative, got {vals}")
    vals += [1] * (3 - len(vals))
    return vals[0], vals[1], vals[2]


_thread_count3 = thread_count3


class KernelBase:
    """What a loaded entry point shares on every device: the entry's reflection, the layouts of its
    globals and parameter blocks, and the binding of dispatch arguments into packed blocks
    (`_bind`).  ComputeKernel (cpu.py) and CudaComputeKernel (cuda.py) load and launch."""

    _target = ""                    # the target the program must be compiled for
    _LAZY: frozenset = frozenset()  # attributes _load() sets at the first use (the build runs in the background)

    def __getattr__(self, name: str):
        if name in type(self)._LAZY and "_load_lock" in self.__dict__:
            self._load()
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _init_entry(self, device: "Device", program: Optional["ShaderProgram"], compiled: CompiledProgram,
                    entry_name: str, device_name: str) -> None:
        refl = compiled.reflection
        if entry_name not in refl.entry_points:
            raise ValueError(f"entry point '{entry_name}' is not in the compiled program "
                             f"(entry points: {', '.join(refl.entry_points) or 'none'})")
        if compiled.target != self._target:
            raise ValueError(f"the {device_name} device needs a program compiled for target '{self._target}', "
                             f"got {compiled.target!r}")
        self.device = device
        self.program = program
        self.compiled = compiled
        self.entry: EntryPointInfo = refl.entry_points[entry_name]
        self.entry_name = entry_name

    def _init_layouts(self) -> None:
        refl = self.compiled.reflection
        self._globals = _lp.field_map(refl.globals)
        self._globals_size = refl.globals_size
        self._globals_required = _lp.required_bindings(refl.globals)
        self._params = _lp.field_map(self.entry.params)
        self._params_size = self.entry.params_size
        self._params_required = _lp.required_bindings(self.entry.params)
        self._numthreads = tuple(int(n) for n in self.entry.numthreads)
        self._reflection = ReflectionCursor(None, list(refl.globals) + [p for p in self.entry.params
                                                                         if p.name not in self._globals])

    @property
    def reflection(self) -> ReflectionCursor:
        """Globals (and entry-point parameters) by name: `kernel.reflection.result.type_layout`."""
        return self._reflection

    @property
    def thread_group_size(self) -> tuple[int, int, int]:
        return self._numthreads

    def _check_buffers(self, values: dict) -> None:
        """Reject arguments this device cannot use (CUDA: buffers of another device)."""

    def _check_after(self) -> None:
        """After a launch whose kernel may have recorded a failure (runtime/kernel_errors.py): raise it.
        The CPU passes a record per dispatch and checks it in dispatch(); the CUDA kernel reads its module's."""

    def _bind(self, thread_count, vars: Optional[dict], kwargs: dict):
        """Validate and pack a dispatch's arguments: ((gx, gy, gz) group counts, globals block,
        parameter block).  `vars` binds globals by name, `kwargs` the entry's `uniform` parameters."""
        for k in _EXTRA_DISPATCH_KWARGS:
            if k in kwargs and k not in self._params:
                del kwargs[k]
        tx, ty, tz = _thread_count3(thread_count)
        nx, ny, nz = self._numthreads
        groups = (-(-tx // nx), -(-ty // ny), -(-tz // nz))
        if vars is None:
            vars = {}
        elif not isinstance(vars, dict):
            raise TypeError(f"dispatch: vars must be a dict of global names to values, got {type(vars).__name__}")
        if vars and self._params:
            # Slang's test runner binds entry-point `uniform` parameters by name like globals: accept them in
            # `vars` too (keyword arguments win).
            moved = [k for k in vars if k not in self._globals and k in self._params and k not in kwargs]
            if moved:
                vars = dict(vars)
                for k in moved:
                    kwargs[k] = vars.pop(k)
        self._check_buffers(vars)
        self._check_buffers(kwargs)
        ctx = _lp.PackContext("dispatch")
        gblock = _lp.pack_block(self._globals, self._globals_size, vars, ctx, self._globals_required)
        pblock = _lp.pack_block(self._params, self._params_size, kwargs, ctx, self._params_required)
        if len(kwargs) < len(self._params):
            missing = [f for n, f in self._params.items() if n not in kwargs]
            f = missing[0]
            raise ValueError(f"dispatch: no value for the entry point's uniform parameter '{f.name}' "
                             f"({f.layout.name}); pass it as {f.name}=... (entry-point uniforms are not "
                             f"zero-initialised)")
        return groups, gblock, pblock


# ------------------------------------------------------------------------------------------ device


class DeviceInfo:
    """What a device says about itself (`device.info`)."""

    def __init__(self, type: DeviceType, api_name: str = "cpu", adapter_name: str = "", num_threads: int = 1):
        self.type = type
        self.api_name = api_name
        self.adapter_name = adapter_name
        self.adapter_luid = None
        self.num_threads = num_threads

    def __repr__(self) -> str:
        return f"DeviceInfo(type={self.type!r}, adapter_name={self.adapter_name!r})"


class Device:
    """The device API shared by the CPU and CUDA devices (cpu.py CpuDevice, cuda.py CudaDevice): module
    and program loading (compiled by the front end for `_target`), kernels (`_kernel_class`), buffer
    creation with its validation; a subclass allocates buffers (`_new_buffer`) and describes itself
    (`_make_info`)."""
    _target = ""                    # what the front end emits for this device: "cpp" / "cuda"
    _kernel_class: type = KernelBase

    def __init__(self, type: DeviceType = DeviceType.cpu, include_paths: Sequence = (), compiler_args: Sequence = (),
                 enable_debug_layers: bool = False, compile_options: PipelineOptions = DEFAULT_OPTIONS):
        self.type = DeviceType(type)
        self.include_paths = [str(p) for p in include_paths]
        self.compiler_args = [str(a) for a in compiler_args]
        self.enable_debug_layers = enable_debug_layers
        # The checked mode (enable_debug_layers=True, or $SLANGJIT_CHECKED=1 when the device is created):
        # programs are compiled with PipelineOptions(checked=True) and kernels report bad accesses after a
        # dispatch (runtime/kernel_errors.py KernelError).
        self.checked = bool(enable_debug_layers) or checked_from_env()
        if self.checked and not compile_options.checked:
            compile_options = dataclasses.replace(compile_options, checked=True)
        # The pass pipeline's options for every program this device compiles (load_program and
        # link_program may override them per program).
        self.compile_options = compile_options
        self.info = self._make_info()
        self.closed = False

    # -- command encoders (runtime/commands.py)

    def create_command_encoder(self, queue=commands.CommandQueueType.graphics) -> commands.CommandEncoder:
        return commands.CommandEncoder(self, queue)

    def submit_command_buffer(self, command_buffer, queue=None) -> int:
        return commands.submit(self, command_buffer, queue)

    def register_command_recording_submitted_callback(self, fn) -> int:
        return commands.callbacks(self).register("submitted", fn)

    def unregister_command_recording_submitted_callback(self, callback_id: int) -> None:
        commands.callbacks(self).unregister("submitted", callback_id)

    def register_command_recording_discarded_callback(self, fn) -> int:
        return commands.callbacks(self).register("discarded", fn)

    def unregister_command_recording_discarded_callback(self, callback_id: int) -> None:
        commands.callbacks(self).unregister("discarded", callback_id)

    # -- modules

    def _resolve_module(self, name: str) -> str:
        name = os.fspath(name)
        names = [name] if name.endswith(".slang") else [name, name + ".slang"]
        tried = []
        for n in names:
            tried.append(os.path.abspath(n))
            if os.path.isfile(n):
                return os.path.abspath(n)
        if not os.path.isabs(name):
            for d in self.include_paths:
                for n in names:
                    p = os.path.join(d, n)
                    tried.append(os.path.abspath(p))
                    if os.path.isfile(p):
                        return os.path.abspath(p)
        raise SlangModuleNotFoundError(f"Slang module '{name}' not found; tried: {', '.join(tried)}")

    def load_module(self, module_name) -> SlangModule:
        path = self._resolve_module(module_name)
        name = os.path.splitext(os.path.basename(path))[0]
        return SlangModule(self, name, path, None)

    def load_module_from_source(self, module_name: str, source: str, path=None) -> SlangModule:
        return SlangModule(self, module_name, os.fspath(path) if path is not None else None, source)

    def load_program(self, module_name, entry_point_names: Sequence[str], additional_source: Optional[str] = None,
                     link_options=None, compile_options: Optional[PipelineOptions] = None) -> ShaderProgram:
        if isinstance(entry_point_names, str):
            entry_point_names = [entry_point_names]
        mod = self.load_module(module_name)
        modules = [mod]
        if additional_source:
            modules.append(self.load_module_from_source(mod.name + "_additional", additional_source))
        return ShaderProgram(self, modules, [mod.entry_point(n) for n in entry_point_names], compile_options)

    def link_program(self, modules: Sequence[SlangModule], entry_points: Sequence[EntryPoint],
                     link_options=None, compile_options: Optional[PipelineOptions] = None) -> ShaderProgram:
        return ShaderProgram(self, list(modules), list(entry_points), compile_options)

    def _compile(self, modules: list[SlangModule], entry_points: list[EntryPoint],
                 compile_options: Optional[PipelineOptions] = None) -> CompiledProgram:
        tcs: list = []
        for ep in entry_points:
            for tc in ep.type_conformances:
                if tc not in tcs:
                    tcs.append(tc)
        opts = self.compile_options if compile_options is None else compile_options
        if self.checked and not opts.checked:
            opts = dataclasses.replace(opts, checked=True)
        try:
            prog = compiler.compile_program([m._source_spec() for m in modules], [e.name for e in entry_points],
                                            target=self._target, include_paths=self.include_paths,
                                            compiler_args=self.compiler_args, type_conformances=tcs, options=opts)
        except CompileError as e:
            # The diagnostic says where the user's program is wrong: no traceback through compiler frames.
            raise e.with_traceback(None) from None
        # Compiler warnings (implicit truncation ...) reach the user as Python warnings, once.
        for w in getattr(prog, "warnings", None) or []:
            warnings.warn(w.format(), SlangWarning, stacklevel=3)
        return prog

    # -- kernels

    def create_compute_kernel(self, program: ShaderProgram = None, **kwargs) -> ComputeKernel:
        if program is None:
            program = kwargs.get("program")
        if not isinstance(program, ShaderProgram):
            program = getattr(program, "program", program)       # ComputeKernelDesc-like
        if not isinstance(program, ShaderProgram):
            raise TypeError(f"create_compute_kernel expects a ShaderProgram, got {type(program).__name__}")
        if not program.entry_point_names:
            raise ValueError("create_compute_kernel: the program has no entry point")
        return self._kernel_class(self, program, program.compiled, program.entry_point_names[0])

    def _create_kernel_from_compiled(self, compiled: CompiledProgram, entry_name: str) -> ComputeKernel:
        """A kernel straight from a `CompiledProgram` (tests, generated kernels)."""
        return self._kernel_class(self, None, compiled, entry_name)

    # -- buffers

    def create_buffer(self, size: int = 0, element_count: int = 0, struct_size: int = 0, resource_type_layout=None,
                      format=None, memory_type: MemoryType = MemoryType.device_local,
                      usage: BufferUsage = BufferUsage.none, default_state=None, label: str = "",
                      data=None, desc=None) -> Buffer:
        if desc is not None:
            size = getattr(desc, "size", size)
            element_count = getattr(desc, "element_count", element_count)
            struct_size = getattr(desc, "struct_size", struct_size)
            usage = getattr(desc, "usage", usage)
            memory_type = getattr(desc, "memory_type", memory_type)
            label = getattr(desc, "label", label)
        size, element_count, struct_size = int(size or 0), int(element_count or 0), int(struct_size or 0)
        if size < 0 or element_count < 0 or struct_size < 0:
            raise ValueError("create_buffer: size, element_count and struct_size must not be negative")
        raw = None
        if data is not None:
            raw = np.ascontiguousarray(_lp.native(np.asarray(data))).reshape(-1).view(np.uint8)
        if resource_type_layout is not None and not struct_size:
            struct_size = _stride_of(resource_type_layout)
        if size:
            if element_count and struct_size and element_count * struct_size != size:
                raise ValueError(f"create_buffer: size ({size}) does not match element_count * struct_size "
                                 f"({element_count} * {struct_size})")
            if raw is not None and raw.size != size:
                raise ValueError(f"create_buffer: data is {raw.size} bytes but size is {size} bytes (they must match)")
        elif element_count:
            if not struct_size:
                raise ValueError("create_buffer: element_count needs struct_size or resource_type_layout")
            size = element_count * struct_size
            if raw is not None and raw.size > size:
                raise ValueError(f"create_buffer: data is {raw.size} bytes, larger than element_count * struct_size "
                                 f"= {size} bytes")
        elif raw is not None:
            size = raw.size
        if size <= 0:
            raise ValueError("create_buffer: the buffer size must be > 0 (give size, element_count with struct_size, "
                             "or data)")
        if usage is None:
            usage = BufferUsage.none
        return self._new_buffer(BufferDesc(size, struct_size, BufferUsage(int(usage)), MemoryType(int(memory_type)),
                                           format, default_state, label), raw)

    def create_texture(self, desc=None, **kwargs):
        """A buffer-backed texture (runtime/textures.py): `create_texture(TextureDesc)` or keyword fields
        (`type`, `format`, `width`, `height`, `depth`, `array_length`, `mip_count`, `usage`, `data`)."""
        return _textures.make_texture(self, desc, **kwargs)

    def create_sampler(self, desc=None, **kwargs):
        """A sampler for `SamplerState` parameters (runtime/textures.py): `create_sampler(SamplerDesc)` or
        keyword fields (`min_filter`, `mag_filter`, `mip_filter`, `address_u/v/w`, `mip_lod_bias`, `min_lod`,
        `max_lod`, `border_color`)."""
        return _textures.make_sampler(self, desc, **kwargs)

    def _make_info(self) -> DeviceInfo:
        raise NotImplementedError

    def _new_buffer(self, desc: BufferDesc, raw) -> Buffer:
        raise NotImplementedError

    # -- misc

    def wait(self) -> None:
        pass

    def wait_for_idle(self, *args, **kwargs) -> None:
        pass

    # SlangPy's CUDA-interop fences: work is ordered with other users of the device (torch) by waiting for it
    def sync_to_cuda(self, *args, **kwargs) -> None:
        self.wait_for_idle()

    def sync_to_device(self, *args, **kwargs) -> None:
        self.wait_for_idle()

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> "Device":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Device(type={self.type.name})"
