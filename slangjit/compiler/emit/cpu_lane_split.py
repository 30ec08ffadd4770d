"""A long lane-blocked kernel in parts that the C++ compiler builds in parallel (CpuOptions.lane_part_lines).

GCC spends most of a cold compile of the seed MLP module optimising one function, learnGradient's lane kernel
(emit/cpu_lane_loops.py, emit/cpu_lane_vregs.py), one core while the others wait.  Here its body is cut at
top-level statements into parts of about equal length: part p is a function of its own over a frame (a struct on
the caller's stack) holding the locals that more than one part uses: an array of lane values stays there (the part
works on it in place: copying kilobytes per block cost the kernel 15%), a single lane value, a mask or a uniform
value is copied in at the part's start and out at its end (registers within the part).  The lane kernel is straight-line structured code
(no return, goto or label: emit/cpu_lane_loops.py turns returns into masks), so running the parts one after the
other is running the body.

The translation unit holds both forms:

    #ifndef SJ_PART      the kernel as one function (a build in one compiler process)
    #else                the frame, the parts' declarations, part p's definition under `#if SJ_PART == p`,
                         and under SJ_PART == 0 the kernel that calls the parts in order
    #endif

and the rest of the program (scalar functions, launchers) is compiled by part 0 only (emit/program.py).  On a
machine with M cores or more (CpuOptions.lane_part_min_cpus) the runtime (runtime/cpu_compiler.py) builds a source
whose header says `// slangjit: parts N on M+ cores` as N compiler processes (`-DSJ_PART=p -c`) at once and links
their objects, then builds the source whole in the background over the cached library (the parts' kernel is ~9% slower: the seed MLP's learnGradient, 1.63 vs 1.49 ms).  Which locals a
part uses is read from its C++ text (the emitter's names are unique words); copying a local that a part only
writes is harmless.
"""
from __future__ import annotations

import re

PARTS_MARK = "// slangjit: parts "       # + "N on M+ cores": the header line that asks the runtime for a parallel
                                         # build of N parts on machines with M cores or more
MAX_PARTS = 4


def parts_for(body_lines: int, part_lines: int) -> int:
    """How many parts a kernel body of `body_lines` lines is cut into (1: not cut)."""
    if part_lines <= 0 or body_lines <= part_lines:
        return 1
    return min(MAX_PARTS, -(-body_lines // part_lines))


FIRST_SHARE = 0.75   # part 0 compiles the rest of the program too (launchers): a shorter share of the body


def _cut_points(n: int, cuts: list[int], parts: int) -> list[int]:
    """Indices into the body where parts start (after 0): the statement starts nearest to equal shares (part 0's
    FIRST_SHARE of the others')."""
    chosen: list[int] = []
    for k in range(1, parts):
        target = n * (k - 1 + FIRST_SHARE) / (parts - 1 + FIRST_SHARE)
        lo = chosen[-1] if chosen else 0
        cands = [c for c in cuts if lo < c < n]
        if not cands:
            break
        c = min(cands, key=lambda c: abs(c - target))
        if c not in chosen:
            chosen.append(c)
    return chosen


def _member(decl: str) -> str:
    """A local's declaration line as a frame member."""
    d = decl.strip()
    if d.startswith("bool sj_live"):
        return "bool sj_live = true;"
    return d


def split_kernel(name: str, sig: str, args: str, void_args: str, decls: list[tuple[str, str]], body: list[str],
                 cuts: list[int], parts: int) -> tuple[list[str], int]:
    """The SJ_PART form of kernel sj_lanes_<name> (see the module's text) and its number of parts.

    sig / args: the kernel's parameter list and the call's arguments; void_args: its `(void)p;` line; decls:
    (C++ name, declaration line) of every local, in order; body: its statements' lines; cuts: indices into
    body where a top-level statement starts."""
    bounds = [0] + _cut_points(len(body), cuts, parts) + [len(body)]
    parts = len(bounds) - 1
    if parts < 2:
        return [], 1
    decl_of = dict(decls)
    words = re.compile(r"\b(" + "|".join(re.escape(n) for n, _ in decls) + r")\b")
    refs = [set(words.findall("\n".join(body[a:b]))) for a, b in zip(bounds, bounds[1:])]
    order = [n for n, _ in decls]
    live_in = [{x for x in refs[p] if any(x in refs[q] for q in range(p))} for p in range(parts)]
    live_out = [{x for x in refs[p] if any(x in refs[q] for q in range(p + 1, parts))} for p in range(parts)]
    members = [n for n in order if any(n in s for s in live_out)]
    # an array of lane values (more than one per lane) stays in the frame, each part reading and writing it there;
    # a single lane value, a mask or a uniform value is copied in and out (registers within a part)
    big = {n for n in members if decl_of[n].count("[") > 1}
    frame = f"sj_F_{name}"
    psig = f"{sig}, sj_Globals* const sj_g, {frame}* __restrict sj_f"
    out = ["#ifndef SJ_PART_FN",
           "#define SJ_PART_FN SJ_LANES_FN __attribute__((visibility(\"hidden\")))",
           "#endif",
           f"struct {frame} {{ {' '.join(_member(decl_of[n]) for n in members) or 'char sj_unused;'} }};"]
    out += [f"SJ_PART_FN void sj_lanes_{name}_p{p}({psig});" for p in range(parts)]
    for p, (a, b) in enumerate(zip(bounds, bounds[1:])):
        out += [f"#if SJ_PART == {p}",
                f"SJ_PART_FN void sj_lanes_{name}_p{p}({psig})",
                "{",
                f"    {void_args} (void)sj_g; (void)sj_f;",
                *[f"    auto& {n} = sj_f->{n};" if n in big else decl_of[n] for n in order if n in refs[p]],
                *[f"    __builtin_memcpy(&{n}, &sj_f->{n}, sizeof {n});" for n in order if n in live_in[p] and n not in big],
                *body[a:b],
                *[f"    __builtin_memcpy(&sj_f->{n}, &{n}, sizeof {n});" for n in order if n in live_out[p] and n not in big],
                "}",
                "#endif"]
    out += ["#if SJ_PART == 0",
            f"SJ_LANES_FN static void sj_lanes_{name}({sig})",
            "{",
            f"    {frame} sj_f;",
            *[f"    sj_lanes_{name}_p{p}({args}, ::sj_g, &sj_f);" for p in range(parts)],
            "}",
            "#endif"]
    return out, parts
