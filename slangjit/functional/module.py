"""`Module`: a Slang module seen from Python; `module.f` is a Function, `module.S` a Struct."""
from __future__ import annotations

import os
from typing import Optional, Sequence

from ..compiler.source import CompileError
from ..runtime import base as _runtime_base
from . import typeview as S
from .function import Function
from .layout import BufferLayout, ModuleLayout, TypeReflection

SHADER_PATH = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "compiler", "slang"))


def _include_paths(device) -> list:
    paths = [SHADER_PATH]
    for p in getattr(device, "include_paths", []):
        if p not in paths:
            paths.append(p)
    return paths


class Module:
    def __init__(self, device_module, options: dict = {}, link: Sequence = ()):
        self.device_module = device_module
        self.device = device_module.device
        self.options = dict(options or {})
        self.link = list(link)
        self.name = device_module.name
        self._include_paths = _include_paths(self.device)
        if device_module.text is not None:
            text = device_module.text
            path = device_module.path or (device_module.name + ".slang")
        else:
            with open(device_module.path, encoding="utf-8") as f:
                text = f.read()
            path = device_module.path
        for m in self.link:
            dm = getattr(m, "device_module", m)
            t = dm.text if dm.text is not None else open(dm.path, encoding="utf-8").read()
            text = text + "\n" + t
        self._source_text = text
        self._source_path = path
        args = getattr(self.device, "compiler_args", ())
        self._refl = S.ModuleTypes.load(text, path, self._include_paths, args)
        # As SlangPy does, a module with errors fails to load (Module.load_*), and every error is reported.
        self._load_errors = S.ModuleTypes.check(text, path, self._include_paths, args)
        self._functions: dict = {}
        self._structs: dict = {}

    @property
    def module(self):
        """The loaded device module underneath (SlangPy's `Module.module`)."""
        return self.device_module

    # -- construction

    @staticmethod
    def load_from_file(device, path: str, options: dict = {}, link: Sequence = ()) -> "Module":
        _ensure_shader_path(device)
        m = Module(device.load_module(path), options, link)
        if m._load_errors:
            raise CompileError(m._load_errors) from None     # located diagnostics: no internal frames
        return m

    @staticmethod
    def load_from_source(device, name: str, source: str, options: dict = {}, link: Sequence = ()) -> "Module":
        _ensure_shader_path(device)
        m = Module(device.load_module_from_source(name, source), options, link)
        if m._load_errors:
            raise CompileError(m._load_errors) from None     # located diagnostics: no internal frames
        return m

    @staticmethod
    def load_from_module(device, module, options: dict = {}, link: Sequence = ()) -> "Module":
        m = Module(module, options, link)
        if m._load_errors:
            raise CompileError(m._load_errors) from None     # located diagnostics: no internal frames
        return m

    # -- lookups

    @property
    def layout(self) -> ModuleLayout:
        """Reflection of the module's declarations (functional/layout.py)."""
        lay = self.__dict__.get("_layout")
        if lay is None:
            lay = self.__dict__["_layout"] = ModuleLayout(self)
        return lay

    def find_type_by_name(self, name: str):
        return self._refl.find_type(name)

    def find_function(self, name: str) -> Optional[Function]:
        f = self._functions.get(name)
        if f is not None:
            return f
        base, gargs = _split_generic(name)
        infos = self._refl.functions(base)
        if not infos:
            # Struct.method spelled "Struct.method"
            if "." in base:
                sname, mname = base.rsplit(".", 1)
                st = self.find_struct(sname)
                return st.find_method(mname) if st is not None else None
            return None
        explicit = {}
        if gargs is not None:
            args = self._refl.generic_args(gargs)
            infos = [i for i in infos if len(i.generic_params) == len(args)]
            if not infos:
                return None
            for i in infos:
                explicit[i.key] = {gp.name: a for gp, a in zip(i.generic_params, args)}
        f = Function(self, base, infos, explicit, display_name=name)
        self._functions[name] = f
        return f

    def require_function(self, name: str) -> Function:
        f = self.find_function(name)
        if f is None:
            raise ValueError(f"Could not find function '{name}'")
        return f

    def find_struct(self, name: str) -> Optional["Struct"]:
        s = self._structs.get(name)
        if s is not None:
            return s
        t = self._refl.find_type(name)
        if t is None:
            return None
        s = Struct(self, t)
        self._structs[name] = s
        return s

    def require_struct(self, name: str) -> "Struct":
        s = self.find_struct(name)
        if s is None:
            raise ValueError(f"Could not find struct '{name}'")
        return s

    def find_function_in_struct(self, struct, name: str) -> Optional[Function]:
        if isinstance(struct, str):
            struct = self.find_struct(struct)
        if struct is None:
            return None
        return struct.find_method(name)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_refl", "_functions", "_structs", "device_module", "_layout"):
            raise AttributeError(name)
        f = self.find_function(name)
        if f is not None:
            if name.isidentifier():
                object.__setattr__(self, name, f)      # later lookups skip __getattr__
            return f
        s = self.find_struct(name)
        if s is not None:
            return s
        raise AttributeError(f"Module '{self.name}' has no function or type named '{name}'")

    def __getitem__(self, name: str):
        return self.__getattr__(name)

    def __repr__(self):
        return f"Module(name='{self.name}', linked_modules={len(self.link)})"


def _ensure_shader_path(device):
    ip = getattr(device, "include_paths", None)
    if ip is not None and SHADER_PATH not in ip:
        ip.insert(0, SHADER_PATH)


def _split_generic(name: str):
    """'f<4, float>' -> ('f', '<4, float>'); 'f' -> ('f', None)."""
    if "<" not in name or not name.endswith(">"):
        return name, None
    i = name.index("<")
    return name[:i].strip(), name[i:]


class Struct:
    """A Slang type of a module: constructor, methods (`this` as first argument), and a dtype for tensors."""

    def __init__(self, module: Module, t: S.SType):
        self.module = module
        self._sj_stype = t
        self.name = t.name
        self._methods: dict = {}

    @property
    def full_name(self):
        return self.name

    @property
    def type(self):
        return self._sj_stype

    @property
    def fields(self) -> dict:
        t = self._sj_stype
        return t.fields if isinstance(t, S.StructT) else {}

    @property
    def differentiable(self) -> bool:
        return self._sj_stype.differentiable

    @property
    def derivative(self):
        d = self._sj_stype.derivative
        return Struct(self.module, d) if d is not None else None

    @property
    def device(self):
        return self.module.device

    @property
    def buffer_layout(self) -> "BufferLayout":
        """The type's layout as an element of a buffer (`stride`: its size rounded up to its alignment)."""
        return BufferLayout(self._sj_stype)

    @property
    def struct(self) -> TypeReflection:
        """SlangPy's `Struct.struct`: the type's reflection (usable as a dtype; `.buffer_layout` as here)."""
        return TypeReflection(self._sj_stype)

    def as_struct(self):
        return self

    def find_method(self, name: str) -> Optional[Function]:
        f = self._methods.get(name)
        if f is not None:
            return f
        t = self._sj_stype
        if not isinstance(t, S.StructT):
            return None
        slang_name = "__init" if name in ("__init", "$init") else name
        infos = self.module._refl.methods(t, slang_name)
        if not infos:
            return None
        f = Function(self.module, slang_name, infos, display_name=f"{self.name}.{name}", struct=self)
        self._methods[name] = f
        return f

    def __call__(self, *args, **kwargs):
        f = self.find_method("__init")
        if f is None:
            raise AttributeError(f"Struct '{self.name}' has no method or sub-type named '__init'")
        return f(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") and name != "__init":
            raise AttributeError(name)
        if name in ("module", "_sj_stype", "name", "_methods"):
            raise AttributeError(name)
        f = self.find_method(name)
        if f is not None:
            return f
        raise AttributeError(f"Struct '{self.name}' has no method or sub-type named '{name}'")

    def __repr__(self):
        return f"Struct({self.name})"


def _layout_of(device_module):
    return Module(device_module).layout


# `device.load_module(...).layout` (SlangPy's slang_module.layout) is this reflection; the runtime asks for it
_runtime_base.set_module_layout_provider(_layout_of)
