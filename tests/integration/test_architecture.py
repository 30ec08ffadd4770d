"""The package's shape: every module belongs to a stage, imports only from its own or earlier
stages, no two modules import each other (directly or through others), and the few imports kept
inside functions each say why.  The stage order is read from docs/architecture.md (one place)."""
from __future__ import annotations

import ast
import os
import re
import sys
from collections import defaultdict

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PKG = os.path.join(ROOT, "slangjit")
DOC = os.path.join(ROOT, "docs", "architecture.md")
MAX_LOCAL_IMPORTS = 20


def read_stages(text: str) -> list[list[str]]:
    """The ```stages block of docs/architecture.md: one stage per line, `N  module-prefix ...`."""
    m = re.search(r"```stages\n(.*?)```", text, re.S)
    assert m, "docs/architecture.md has no ```stages block"
    stages = []
    for line in m.group(1).splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        num, *names = line.split()
        assert int(num) == len(stages), f"stages must be numbered 0, 1, 2, ... in order: {line!r}"
        stages.append(names)
    return stages


def module_files(pkg_dir: str) -> dict[str, str]:
    out = {}
    base = os.path.dirname(pkg_dir)
    for dirpath, _, files in os.walk(pkg_dir):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                mod = os.path.relpath(path, base)[:-3].replace(os.sep, ".")
                out[mod[:-len(".__init__")] if mod.endswith(".__init__") else mod] = path
    return out


class Import:
    def __init__(self, src: str, line: int, targets: list[str], local: bool, reason: str, text: str):
        self.src, self.line, self.targets, self.local, self.reason, self.text = src, line, targets, local, reason, text


def imports_of(mod: str, path: str, mods: dict) -> list[Import]:
    source = open(path, encoding="utf-8").read()
    lines = source.splitlines()
    tree = ast.parse(source)
    is_pkg = path.endswith("__init__.py")
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            for inner in ast.walk(node):
                if inner is not node and isinstance(inner, (ast.Import, ast.ImportFrom)):
                    in_function.add(id(inner))
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        targets = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                parts = mod.split(".")
                if not is_pkg:
                    parts = parts[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in mods else base)
        resolved = []
        for t in targets:
            while t not in mods and "." in t:
                t = t.rsplit(".", 1)[0]
            if t in mods and t != mod:
                resolved.append(t)
        comment = lines[node.lineno - 1].split("#", 1)[1].strip() if "#" in lines[node.lineno - 1] else ""
        out.append(Import(mod, node.lineno, sorted(set(resolved)), id(node) in in_function, comment,
                          lines[node.lineno - 1].strip()))
    return out


def stage_of(mod: str, stages: list[list[str]]):
    best, best_len = None, -1
    for i, names in enumerate(stages):
        for n in names:
            if (mod == n or mod.startswith(n + ".")) and len(n) > best_len:
                best, best_len = i, len(n)
    return best


@pytest.fixture(scope="module")
def graph():
    stages = read_stages(open(DOC, encoding="utf-8").read())
    mods = module_files(PKG)
    imps = {m: imports_of(m, p, mods) for m, p in mods.items()}
    return stages, mods, imps


def test_every_module_has_a_stage(graph):
    stages, mods, _ = graph
    missing = sorted(m for m in mods if stage_of(m, stages) is None)
    assert not missing, f"modules with no stage in docs/architecture.md: {missing}"


def test_no_import_from_a_later_stage(graph):
    stages, mods, imps = graph
    bad = []
    for m, lst in imps.items():
        for imp in lst:
            for t in imp.targets:
                if stage_of(t, stages) > stage_of(m, stages):
                    bad.append(f"{m}:{imp.line} (stage {stage_of(m, stages)}) imports {t} "
                               f"(stage {stage_of(t, stages)})")
    assert not bad, "imports from a later stage:\n" + "\n".join(bad)


def find_cycles(edges: dict) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in list(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return out


def test_no_import_cycles(graph):
    _, mods, imps = graph
    edges = defaultdict(set)
    for m, lst in imps.items():
        edges[m]
        for imp in lst:
            edges[m].update(imp.targets)
    cycles = find_cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_function_local_imports_are_few_and_explained(graph):
    _, _, imps = graph
    local = [imp for lst in imps.values() for imp in lst if imp.local]
    unexplained = [f"{i.src}:{i.line}: {i.text}" for i in local if not i.reason]
    assert not unexplained, "function-local imports need a `# reason` comment:\n" + "\n".join(unexplained)
    assert len(local) <= MAX_LOCAL_IMPORTS, (
        f"{len(local)} function-local imports (at most {MAX_LOCAL_IMPORTS}):\n" +
        "\n".join(f"{i.src}:{i.line}: {i.text}" for i in local))


def test_checker_of_this_test_finds_a_cycle_and_a_backward_import(tmp_path):
    """The checks above can fail: a two-module cycle and an import from a later stage are found."""
    pkg = tmp_path / "slangjit"
    (pkg / "a").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a" / "__init__.py").write_text("")
    (pkg / "a" / "x.py").write_text("from . import y\n")
    (pkg / "a" / "y.py").write_text("def f():\n    from .x import g  # no reason needed to be found\n")
    (pkg / "b.py").write_text("from .a import x\n")
    mods = module_files(str(pkg))
    imps = {m: imports_of(m, p, mods) for m, p in mods.items()}
    edges = defaultdict(set)
    for m, lst in imps.items():
        edges[m]
        for imp in lst:
            edges[m].update(imp.targets)
    assert find_cycles(edges) == [["slangjit.a.x", "slangjit.a.y"]]
    stages = [["slangjit.a"], ["slangjit.b", "slangjit"]]
    assert stage_of("slangjit.a.x", stages) == 0 and stage_of("slangjit.b", stages) == 1
    assert stage_of("slangjit", stages) == 1
    local = [i for lst in imps.values() for i in lst if i.local]
    assert [(i.src, i.targets) for i in local] == [("slangjit.a.y", ["slangjit.a.x"])]


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
