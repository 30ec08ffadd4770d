"""The CUDA translation unit's prelude: only the sections of prelude.h that the generated code uses.

NVRTC parses every template and overload of the text it is given, and a module's generated code uses a
small part of the prelude (the seed MLP's adjustParameters: `half` and `vec`), so the CUDA target pastes
a trimmed prelude (emit/cuda.py CudaTarget.prelude):

1. *The CUDA view.* `#if` blocks on SJ_CUDA, and on `defined(__CUDACC__) || defined(__CUDACC_RTC__)`,
   are resolved as nvcc and NVRTC both would (the CPU-only code goes); any other conditional stays.
2. *Sections.* The prelude files are divided by `// @section NAME [always] [auto] [needs: A B ...]`
   lines (the text before the first one is the head, always kept).  A name that appears again
   continues that section (its later markers carry no attributes), so a section can wrap around
   another that must sit between its parts.  `needs` lists the sections whose declarations it uses
   (declared by hand; tests/compiler/test_cuda_prelude.py compiles every section with its needs
   alone, and checks the generated code against the whole prelude); `always` sections are always
   kept; an `auto` section (overloads or specialisations that join two others) is kept exactly
   when all of its needs are.
3. *Selection.* The generated text's `sj::NAME`, `sj_cuda::NAME` and `SJ_NAME` tokens are looked up
   among the names each section declares (functions, types, macros, variables: read from the
   section's text); every section that declares a used name is kept (so an overload set spread
   over sections is kept whole), with its needs, to a fixed point.  A used name that no section
   declares keeps the whole prelude (never a missing declaration).  Sections stay in prelude order,
   so the text is a function of the generated code alone (byte-identical for the same input).
"""
from __future__ import annotations

import re
from typing import Optional

from .cpp import prelude_text

# Conditions resolved in the CUDA view (true under both nvcc and NVRTC); others are left to the compiler.
_KNOWN = {
    "SJ_CUDA": True,
    "!SJ_CUDA": False,
    "defined(__CUDACC__) || defined(__CUDACC_RTC__)": True,
    "!defined(__CUDACC_RTC__) && !defined(__CUDACC__)": False,
}
_MARK = re.compile(r"^// @section (\w+)((?: \w+)*)(?: needs:((?: \w+)+))?\s*$")
_DIRECTIVE = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b\s*(.*?)\s*(?://.*)?$")
_USED = re.compile(r"\b(?:sj|sj_cuda)::(?:detail::)?(\w+)|\b(SJ_\w+)")
_NOT_NAMES = {"int", "unsigned", "sizeof", "decltype", "alignof", "operator", "static_cast", "reinterpret_cast",
              "const_cast", "if", "for", "while", "return", "switch", "asm", "void", "bool", "float", "double",
              "char", "short", "long", "auto", "typename", "template", "noexcept", "static_assert", "alignas"}
_DEF_PATTERNS = (
    re.compile(r"\b(?:struct|class|union)\s+(?:alignas\([^)]*\)\s*)?(\w+)(?=\s*(?:[{:;<]|final\b))"),
    re.compile(r"\busing\s+(\w+)\s*="),
    re.compile(r"\btypedef\b[^;{}]*?\b(\w+)\s*;"),
    re.compile(r"^[ \t]*SJ_[A-Z0-9_]+\(\s*(\w+)", re.M),                # a definition macro's first argument
    re.compile(r"\b(?:__device__|__shared__|__constant__|constexpr)\b[^;(){}=]*?\b(\w+)\s*(?:\[|=|;)"),
)
_FN_LINE = re.compile(r"\b(?:SJ_FN|__device__|__forceinline__|inline|__noinline__)\b(.*)")
_CALLISH = re.compile(r"\b(\w+)\s*\(")
_ENUM = re.compile(r"\benum\b[^{;]*\{([^}]*)\}")


class Section:
    def __init__(self, name: str, flags: set, needs: tuple):
        self.name, self.flags, self.needs = name, flags, needs
        self.chunks: list[tuple[int, str]] = []        # (position in the prelude, text)
        self.names: set[str] = set()

    @property
    def always(self) -> bool:
        return "always" in self.flags

    @property
    def auto(self) -> bool:
        return "auto" in self.flags


def cuda_view(text: str) -> str:
    """`text` with the conditionals of _KNOWN resolved (nested unknown conditionals are kept)."""
    out = []
    # stack entries: (kind, state) with kind "known"/"unknown"; for known: state = [taking, taken_any]
    stack: list = []

    def live() -> bool:
        return all(s[1][0] for s in stack if s[0] == "known")
    for line in text.splitlines(keepends=True):
        m = _DIRECTIVE.match(line)
        if m:
            d, cond = m.group(1), m.group(2).strip()
            if d in ("if", "ifdef", "ifndef"):
                val = _KNOWN.get(cond) if d == "if" else None
                if val is None:
                    stack.append(("unknown", None))
                    if live():
                        out.append(line)
                else:
                    stack.append(("known", [val, val]))
                continue
            if not stack:
                raise ValueError(f"prelude: unbalanced {line.strip()}")
            kind, st = stack[-1]
            if kind == "unknown":
                if live():
                    out.append(line)
                if d == "endif":
                    stack.pop()
                continue
            if d == "else":
                st[0] = not st[1]
                st[1] = True
            elif d == "elif":
                # after a known branch: an #elif with an unknown condition becomes a nested #if
                val = _KNOWN.get(cond)
                if st[1]:
                    st[0] = False
                elif val is not None:
                    st[0] = st[1] = val
                else:
                    raise ValueError(f"prelude: unsupported #elif after a resolved #if: {line.strip()}")
            else:
                stack.pop()
            continue
        if live():
            out.append(line)
    if stack:
        raise ValueError("prelude: unterminated #if")
    return "".join(out)


def _strip_comments(t: str) -> str:
    t = re.sub(r"/\*.*?\*/", " ", t, flags=re.S)
    return re.sub(r"//[^\n]*", "", t)


def _namespace_scope(t: str) -> str:
    """`t` with the insides of every brace pair that is not a namespace's blanked (function bodies,
    class members, initialisers): what is left is declared at namespace scope."""
    out, kinds = [], []
    for m in re.finditer(r"[{}]|[^{}]+", t):
        s = m.group(0)
        if s == "{":
            before = "".join(out[-3:])
            kinds.append("ns" if re.search(r"\bnamespace(?:\s+\w+)?\s*$", before) else "other")
            out.append(s)
        elif s == "}":
            if kinds:
                kinds.pop()
            out.append(s)
        elif all(k == "ns" for k in kinds):
            out.append(s)
        else:
            out.append(re.sub(r"[^\n]", " ", s))
    return "".join(out)


def declared_names(text: str) -> set:
    """Names a section's text declares at namespace scope: macros, types, aliases, variables,
    functions (the call-like name after a function specifier), enumerators."""
    t = _strip_comments(text)
    # macro bodies declare nothing until used (the uses are read below); their lines are dropped
    top = _namespace_scope(re.sub(r"^[ \t]*#[ \t]*define\b(?:[^\n]*\\\n)*[^\n]*", "", t, flags=re.M))
    names = set(re.findall(r"^[ \t]*#[ \t]*define[ \t]+(\w+)", t, re.M))
    for p in _DEF_PATTERNS:
        names.update(p.findall(top))
    for line in top.splitlines():
        m = _FN_LINE.search(line)
        if m:
            for c in _CALLISH.finditer(m.group(1)):
                if c.group(1) == "operator":
                    break
                if c.group(1) not in _NOT_NAMES:
                    names.add(c.group(1))
                    break
    for body in _ENUM.findall(t):
        names.update(re.findall(r"([A-Za-z_]\w*)\s*(?:=[^,]*)?(?:,|$)", body.strip()))
    return names - _NOT_NAMES


class Prelude:
    """The CUDA view of the prelude, divided into sections."""

    def __init__(self, text: str):
        self.full = text
        self.head = ""
        self.sections: dict[str, Section] = {}
        cur: Optional[Section] = None
        buf: list[str] = []
        pos = 0

        def flush():
            nonlocal buf, pos
            if cur is None:
                self.head = "".join(buf)
            else:
                cur.chunks.append((pos, "".join(buf)))
            pos += 1
            buf = []
        for line in text.splitlines(keepends=True):
            m = _MARK.match(line.rstrip("\n"))
            if m is None:
                if line.startswith("// @section"):
                    raise ValueError(f"prelude: bad section marker {line.strip()!r}")
                buf.append(line)
                continue
            flush()
            name, flags, needs = m.group(1), set((m.group(2) or "").split()), tuple((m.group(3) or "").split())
            if name in self.sections:
                if flags or needs:
                    raise ValueError(f"prelude: section {name} continued with attributes")
                cur = self.sections[name]
            else:
                if flags - {"always", "auto"}:
                    raise ValueError(f"prelude: section {name}: unknown flags {sorted(flags)}")
                cur = self.sections[name] = Section(name, flags, needs)
        flush()
        for s in self.sections.values():
            for n in s.needs:
                if n not in self.sections:
                    raise ValueError(f"prelude: section {s.name} needs unknown section {n}")
            if s.auto and not s.needs:
                raise ValueError(f"prelude: auto section {s.name} has no needs")
            s.names = declared_names("".join(c for _, c in s.chunks))
        self.providers: dict[str, list[str]] = {}
        for s in self.sections.values():
            if s.auto:
                continue
            for n in s.names:
                self.providers.setdefault(n, []).append(s.name)

    def closure(self, roots) -> set:
        """`roots`, the always sections, their needs and the auto sections they complete (fixed point)."""
        keep = set(roots) | {s.name for s in self.sections.values() if s.always}
        while True:
            todo = list(keep)
            while todo:
                for n in self.sections[todo.pop()].needs:
                    if n not in keep:
                        keep.add(n)
                        todo.append(n)
            more = {s.name for s in self.sections.values()
                    if s.auto and s.name not in keep and all(n in keep for n in s.needs)}
            if not more:
                return keep
            keep |= more

    def select(self, generated: str) -> Optional[set]:
        """The sections `generated` (the translation unit without the prelude) needs; None when it uses
        an `sj::` name that no section declares (the caller keeps the whole prelude)."""
        roots = set()
        for m in _USED.finditer(generated):
            name = m.group(1) or m.group(2)
            prov = self.providers.get(name)
            if prov is None:
                if m.group(2) is not None:          # an SJ_ macro of the generated code's own
                    continue
                return None
            roots.update(prov)
        return self.closure(roots)

    def text(self, keep: set) -> str:
        chunks = sorted((p, c) for s in self.sections.values() if s.name in keep for p, c in s.chunks)
        return self.head + "".join(c for _, c in chunks)


_prelude: Optional[Prelude] = None


def cuda_prelude() -> Prelude:
    global _prelude
    if _prelude is None:
        _prelude = Prelude(cuda_view(prelude_text()))
    return _prelude


PRELUDE_BEGIN = "// ---- slangjit prelude"
PRELUDE_END = "// ---- end of slangjit prelude"


def trimmed_prelude(generated: str) -> str:
    """The prelude for a CUDA translation unit whose other parts are `generated`, between two marker
    lines that name the sections kept (tests swap the whole prelude in between them)."""
    p = cuda_prelude()
    keep = p.select(generated)
    if keep is None:
        keep = set(p.sections)
    names = [n for n in p.sections if n in keep]
    return (f"{PRELUDE_BEGIN} (CUDA view; sections: {' '.join(names)})\n" + p.text(keep) +
            f"{PRELUDE_END}\n")


def full_prelude() -> str:
    """Every section (for tests: the same translation unit with nothing left out)."""
    p = cuda_prelude()
    return p.text(set(p.sections))
