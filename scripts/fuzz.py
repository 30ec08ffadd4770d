#!/usr/bin/env python3
"""Fuzz the compiler with seeded token-level mutations of the conformance programs (issue 15).

Each mutant is compiled (front end + passes + C++ emission) in a worker process with a per-program time
limit.  A mutant must either compile, or raise `CompileError` whose every diagnostic has a code (not an
E9xxx internal error) and a real location (a file, line >= 1).  A sample of the accepted mutants is also
compiled by the system C++ compiler (the runtime's `cpu_compiler`: its compiler and flags, -fsyntax-only)
and, where NVRTC is installed, emitted as CUDA and compiled by NVRTC: an error there on a program the
front end accepted is a slangjit bug.  Anything else -- another exception, a hang past the time limit, a
worker that died (segfault, memory) -- is a failure.

    python scripts/fuzz.py --seconds 3600 --seed 1 --jobs 1          # the long mode
    python scripts/fuzz.py --seed 1 --replay 1234                    # print mutant 1234 of seed 1

Mutant i of seed s is a pure function of (s, i, the conformance corpus), so a failure is reproduced by
`--replay`.  tests/compiler/test_fuzz.py runs the same engine for a time budget in CI and holds the list
of known failures (each with the issue item it belongs to); this script reports them separately too.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import multiprocessing as mp
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import wait as mp_wait

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# ------------------------------------------------------------------------------------------ corpus


def conformance_root():
    for c in (os.environ.get("SLANGJIT_CONFORMANCE"), os.path.join(ROOT, "..", "shared", "conformance"),
              os.path.join(ROOT, "shared", "conformance"), os.path.join(ROOT, ".gpu", "conformance"),
              "/work/shared/conformance"):
        if c and os.path.isdir(os.path.join(c, "tests")):
            return os.path.abspath(c)
    return None


def corpus():
    """[(path, text)] of the conformance programs, in a fixed order."""
    root = conformance_root()
    if root is None:
        return []
    out = []
    for p in sorted(glob.glob(os.path.join(root, "tests", "**", "*.slang"), recursive=True)):
        with open(p, encoding="utf-8") as f:
            text = f.read()
        if "TEST_IGNORE_FILE" in text:
            continue
        out.append((p, text))
    return out


def entry_of(text: str) -> str:
    if "computeMain" in text:
        return "computeMain"
    m = re.search(r"\[\s*numthreads\s*\([^)]*\)\s*\]\s*(?:\[[^\]]*\]\s*)*void\s+(\w+)", text)
    return m.group(1) if m else "computeMain"


# ------------------------------------------------------------------------------------------ mutations

TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<num>0[xX][0-9a-fA-F]+[uUlL]*|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[fFhHlLuU]*)
  | (?P<str>"(?:\\.|[^"\\\n])*")
  | (?P<id>[A-Za-z_]\w*)
  | (?P<op><<=|>>=|\+\+|--|&&|\|\||==|!=|<=|>=|->|::|[-+*/%&|^]=|<<|>>|.)
""", re.X | re.S)

EXTREME_INTS = ("0", "-1", "1", "2147483647", "2147483648", "-2147483648", "4294967295", "4294967296",
                "9223372036854775807", "18446744073709551616", "0x7fffffff", "0xffffffff",
                "0x1234567890abcdef1234567890abcdef12345678", "99999999999999999999999999999999", "1u", "0u",
                "4294967295u", "65536", "1024", "1025", "100000000")
EXTREME_FLOATS = ("0.0", "-0.0", "1e300", "1e-300", "1e38", "3.5e38", "1e-45", "1.5", "-1.5", "1e308",
                  "0.5h", "65504.0h", "1e39f", "1.0/0.0", "0.0/0.0", "1.7")
TYPES = ("float", "int", "uint", "half", "double", "bool", "float2", "float3", "float4", "int2", "int3",
         "uint3", "uint4", "float2x2", "float3x3", "float4x4", "int64_t", "uint64_t", "int16_t", "uint8_t",
         "void", "float1", "bool3", "half4", "double2", "Tensor", "DifferentialPair<float>", "vector<float,5>",
         "vector<float,0>", "matrix<float,2,-1>", "float[4]", "float*", "Atomic<int>", "RWStructuredBuffer<float>",
         "StructuredBuffer<int>", "Texture2D", "ByteAddressBuffer", "This", "Optional<int>", "Tuple<int,float>",
         "NoSuchType")
KEYWORDS = ("return", "break", "continue", "if", "else", "for", "while", "do", "switch", "case", "default",
            "struct", "interface", "extension", "static", "const", "in", "out", "inout", "uniform",
            "groupshared", "void", "let", "var", "typedef", "typealias", "import", "namespace", "__generic",
            "[Differentiable]", "[numthreads(4294967296,1,1)]", "[numthreads(1,1,true)]", "[MaxIters(0)]",
            "[ForceUnroll]", "[BackwardDerivative(f)]", "no_diff", "fwd_diff(", "bwd_diff(", "detach(",
            "this", "true", "false", "nullptr", "none", "sizeof", "#define X", "#include \"x.slang\"", "#if 0",
            "#endif", "__init", "__subscript", "property", "public", "private", "associatedtype", "where",
            "throws", "try", "discard", "SV_DispatchThreadID", "SV_GroupIndex", ":", "<", ">", ",")
OPERATORS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "&&", "||", "==", "!=", "<", ">", "<=",
             ">=", "=", "+=", "-=", "*=", "/=", "%=", "!", "~", "?", ":", ".", "->", "::", "++", "--", ",")
STRUCTURAL = (";", "{", "}", "(", ")", "[", "]", ",")


def tokenize(text: str):
    return [(m.lastgroup, m.group()) for m in TOKEN.finditer(text)]


def _significant(toks):
    return [i for i, (k, _) in enumerate(toks) if k not in ("ws", "comment")]


def mutate_once(toks, rng: random.Random):
    sig = _significant(toks)
    if not sig:
        return "none"
    op = rng.choice(("delete", "duplicate", "swap", "literal", "literal", "type", "type", "structural",
                     "keyword", "keyword", "ident", "operator", "move"))
    i = rng.choice(sig)
    kind, val = toks[i]
    if op == "delete":
        toks[i] = ("ws", " ")
    elif op == "duplicate":
        toks.insert(i, ("ws", " "))
        toks.insert(i, (kind, val))
    elif op == "swap":
        k = sig.index(i)
        if k + 1 < len(sig):
            j = sig[k + 1]
            toks[i], toks[j] = toks[j], toks[i]
    elif op == "literal":
        nums = [j for j in sig if toks[j][0] == "num"]
        if not nums:
            return mutate_once(toks, rng)
        j = rng.choice(nums)
        isfloat = any(c in toks[j][1] for c in ".eE") and not toks[j][1].lower().startswith("0x")
        pool = EXTREME_FLOATS if (isfloat and rng.random() < 0.8) else EXTREME_INTS
        toks[j] = ("num", rng.choice(pool + EXTREME_FLOATS[:3] + EXTREME_INTS[:3]))
        op = f"literal->{toks[j][1]}"
    elif op == "type":
        tys = [j for j in sig if toks[j][0] == "id" and toks[j][1] in TYPES]
        j = rng.choice(tys) if tys else i
        toks[j] = ("id", rng.choice(TYPES))
    elif op == "structural":
        ss = [j for j in sig if toks[j][1] in STRUCTURAL]
        if not ss:
            return mutate_once(toks, rng)
        j = rng.choice(ss)
        toks[j] = ("ws", " ") if rng.random() < 0.7 else ("op", rng.choice(STRUCTURAL))
    elif op == "keyword":
        toks.insert(i, ("ws", " "))
        kw = rng.choice(KEYWORDS)
        if kw.startswith("#"):
            toks.insert(i, ("ws", "\n" + kw + "\n"))
        else:
            toks.insert(i, ("id", kw))
        op = f"keyword {kw}"
    elif op == "ident":
        ids = [j for j in sig if toks[j][0] == "id"]
        if len(ids) < 2:
            return mutate_once(toks, rng)
        a, b = rng.choice(ids), rng.choice(ids)
        toks[a] = toks[b]
    elif op == "operator":
        ops = [j for j in sig if toks[j][0] == "op" and toks[j][1] not in STRUCTURAL[:3]]
        if not ops:
            return mutate_once(toks, rng)
        j = rng.choice(ops)
        toks[j] = ("op", rng.choice(OPERATORS))
    elif op == "move":             # a token copied to a random other place
        j = rng.choice(sig)
        toks.insert(j, ("ws", " "))
        toks.insert(j, (kind, val))
    return op


def make_mutant(programs, seed: int, index: int):
    """Mutant `index` of `seed`: (path, text, [mutation names])."""
    rng = random.Random(f"slangjit-fuzz:{seed}:{index}")
    path, text = programs[rng.randrange(len(programs))]
    toks = tokenize(text)
    ops = [mutate_once(toks, rng) for _ in range(rng.choice((1, 1, 1, 2, 2, 3)))]
    return path, "".join(v for _, v in toks), ops


# ------------------------------------------------------------------------------------------ one compile

_DIAG_CODE = re.compile(r"^E\d{4}$")
# A diagnostic that quotes a Python exception ("could not parse this (KeyError: ...)") is an internal error
# dressed as a user error.
_MASKED = re.compile(r"\b(\w+Error|Exception): ")


def _normalize(msg: str, quotes: bool = True) -> str:
    if quotes:
        msg = re.sub(r"'[^']*'|\"[^\"]*\"|`[^`]*`", "_", msg)
    msg = re.sub(r"\b(type|types|to|from) \S+", r"\1 _", msg)
    msg = re.sub(r"\d+", "0", msg)
    return msg.strip()[:90]


def _cxx_check(source: str) -> str | None:
    """None, or the C++ compiler's first error lines on `source` (the runtime's compiler and flags)."""
    from slangjit.runtime import cpu_compiler    # the runtime's compiler choice and flags
    cmd = cpu_compiler.find_compiler()
    flags = [f for f in cpu_compiler.compile_flags() if f not in ("-shared", "-O2", "-O3")]
    with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as f:
        f.write(source)
        name = f.name
    try:
        p = subprocess.run([*cmd, *flags, "-O0", "-fsyntax-only", name], capture_output=True, text=True,
                           timeout=300)
    finally:
        os.unlink(name)
    if p.returncode == 0:
        return None
    errs = [l for l in (p.stderr or p.stdout).splitlines() if "error" in l]
    return "\n".join(errs[:3]) or (p.stderr or p.stdout)[:400]


def _nvrtc_ok() -> bool:
    try:
        from slangjit.runtime import cuda_compiler
        cuda_compiler.nvrtc_version()
        return bool(cuda_compiler.cuda_include_dirs())
    except Exception:     # noqa: BLE001 -- no NVRTC wheel or library: that check is skipped
        return False


_MEM_MB = 0      # in a worker: the front end's address-space allowance (a runaway compile raises MemoryError)


def _limit_memory(on: bool):
    """Soft RLIMIT_AS = what the process maps now + _MEM_MB while the front end runs; lifted for NVRTC (which
    reserves a lot of address space) and the C++ compiler."""
    if not _MEM_MB:
        return
    try:
        import resource
        if on:
            with open("/proc/self/statm") as f:
                vm = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
            resource.setrlimit(resource.RLIMIT_AS, (vm + (_MEM_MB << 20), resource.RLIM_INFINITY))
        else:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    except (ImportError, ValueError, OSError):
        pass


def _compile(*a, **k):
    from slangjit.compiler import compile_program
    _limit_memory(True)
    try:
        return compile_program(*a, **k)
    finally:
        _limit_memory(False)


def check_one(path: str, text: str, cxx: bool, nvrtc: bool) -> dict:
    """Compile one mutant; returns {'status': accepted|rejected|fail, 'kind', 'detail', 'sig'}."""
    from slangjit.compiler import SourceSpec
    from slangjit.compiler.source import CompileError
    name = os.path.splitext(os.path.basename(path))[0]
    inc = [os.path.dirname(path)]
    entry = entry_of(text)
    try:
        prog = _compile([SourceSpec(text=text, name=name)], [entry], include_paths=inc)
    except CompileError as e:
        for d in e.diagnostics:
            loc = d.loc
            if not _DIAG_CODE.match(str(d.code or "")):
                return _fail("no-code", f"diagnostic without a code: {d.format()[:300]}", d.message)
            if d.code.startswith("E9"):
                return _fail(f"internal {d.code}", d.format()[:400], d.message)
            m = _MASKED.search(d.message)
            if m:
                return _fail(f"masked internal {d.code}", d.format()[:400], f"{m.group(1)} " + d.message)
            if loc is None or loc.file is None or not getattr(loc.file, "path", None) or loc.line < 1:
                return _fail("unlocated", f"{d.code} at {loc}: {d.message[:300]}", d.code + " " + d.message)
            if loc.line > len(loc.file.line_starts()) or loc.col < 1:
                return _fail("located past the end", f"{d.code} at {loc} (the file has "
                             f"{len(loc.file.line_starts())} lines): {d.message[:300]}", d.code + " " + d.message)
        return {"status": "rejected", "code": e.diagnostics[0].code}
    except RecursionError as e:
        return _fail("RecursionError", _tb(e), "")
    except MemoryError as e:
        return _fail("MemoryError", f"the front end used more than {_MEM_MB} MB ({_tb(e)})", _frame(e))
    except Exception as e:      # noqa: BLE001 -- anything but CompileError is a compiler bug
        return _fail(type(e).__name__, _tb(e), _frame(e) + " " + str(e))
    res = {"status": "accepted"}
    if cxx:
        err = _cxx_check(prog.source)
        if err:
            return _fail("c++ error", err, err.splitlines()[0].split("error:", 1)[-1])
        res["cxx"] = True
    if nvrtc:
        from slangjit.runtime import cuda_compiler
        try:
            cu = _compile([SourceSpec(text=text, name=name)], [entry], include_paths=inc, target="cuda")
        except CompileError as e:
            return _fail("cuda-only rejection", e.diagnostics[0].format()[:400], e.diagnostics[0].message)
        except Exception as e:      # noqa: BLE001
            return _fail(f"cuda {type(e).__name__}", _tb(e), _frame(e) + " " + str(e))
        try:
            cuda_compiler.compile_source(cu.source, "compute_90")
        except Exception as e:      # noqa: BLE001
            msg = str(e)
            errs = [l for l in msg.splitlines() if "error" in l]
            first = next((l.split("error:", 1)[1] for l in errs if "error:" in l), msg[:200])
            return _fail("nvrtc error", "\n".join(errs[:3]) or msg[:400], first)
        res["nvrtc"] = True
    return res


def _frame(e: BaseException) -> str:
    tb = traceback.extract_tb(e.__traceback__)
    inner = [f for f in tb if "slangjit" in f.filename] or tb
    f = inner[-1] if inner else None
    return f"{os.path.basename(f.filename)}:{f.name}" if f else "?"


def _tb(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]} (at {_frame(e)})"


def _fail(kind: str, detail: str, sigtext: str) -> dict:
    # Names quoted in an internal error tell distinct bugs apart ('CppEmitter' vs 'NoneType' has no 'attrs').
    internal = kind.startswith("internal") or kind.startswith("masked") or kind.endswith("Error")
    return {"status": "fail", "kind": kind, "detail": detail,
            "sig": f"{kind} | {_normalize(sigtext, quotes=not internal)}"}


# ------------------------------------------------------------------------------------------ workers


def _worker(conn, mem_mb: int):
    os.environ["SLANGJIT_NO_FRONTEND_CACHE"] = "1"
    global _MEM_MB
    _MEM_MB = mem_mb
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 4000))
    parent = os.getppid()
    while True:
        # A worker whose parent died leaves (its siblings may hold the other end of its pipe, so no EOF comes).
        while not conn.poll(1.0):
            if os.getppid() != parent:
                return
        try:
            job = conn.recv()
        except EOFError:
            return
        if job is None:
            return
        path, text, cxx, nvrtc = job
        try:
            r = check_one(path, text, cxx, nvrtc)
        except MemoryError:
            r = _fail("MemoryError", "MemoryError", "memory")
        except BaseException as e:     # noqa: BLE001
            r = _fail(type(e).__name__, _tb(e), _frame(e))
        conn.send(r)


def _warm():
    """Import the compiler and parse the core library once in the parent, so that forked workers start warm."""
    try:
        from slangjit.compiler import SourceSpec, compile_program
        compile_program([SourceSpec(text=_WARM, name="fuzz_warm")], ["computeMain"])
    except Exception:      # noqa: BLE001 -- only a speed-up
        pass


_WARM = """RWStructuredBuffer<float> o;
[numthreads(1, 1, 1)] void computeMain(uint3 t : SV_DispatchThreadID) { o[t.x] = sin(float(t.x)); }
"""


STOP = []      # non-empty: hand out no more mutants (SIGINT / SIGTERM in the long mode); running ones finish


class Pool:
    """`jobs` worker processes; each mutant gets `timeout` seconds, after which its worker is killed."""

    def __init__(self, jobs: int, timeout: float, mem_mb: int = 3072, recycle: int = 2000):
        self.jobs, self.timeout, self.mem_mb, self.recycle = jobs, timeout, mem_mb, recycle
        self.ctx = mp.get_context("fork" if sys.platform != "win32" else "spawn")
        _warm()
        self.workers = [self._spawn() for _ in range(jobs)]

    def _spawn(self):
        a, b = self.ctx.Pipe()
        p = self.ctx.Process(target=_worker, args=(b, self.mem_mb), daemon=True)
        p.start()
        b.close()
        return {"proc": p, "conn": a, "job": None, "t0": 0.0, "n": 0}

    def _restart(self, w):
        try:
            w["proc"].kill()
        except Exception:       # noqa: BLE001
            pass
        w["proc"].join(5)
        w["conn"].close()
        nw = self._spawn()
        w.update(nw)

    def run(self, jobs_iter, on_result, deadline: float | None = None):
        """Feed `(key, payload)` items of `jobs_iter` to the workers; call `on_result(key, result)`."""
        it = iter(jobs_iter)
        exhausted = False
        while True:
            for w in self.workers:
                if w["job"] is None and not exhausted and not STOP and (deadline is None or time.time() < deadline):
                    try:
                        key, payload = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    if w["n"] >= self.recycle:
                        self._restart(w)
                    w["job"], w["t0"] = (key, payload), time.time()
                    w["conn"].send(payload)
                    w["n"] += 1
            busy = [w for w in self.workers if w["job"] is not None]
            if not busy:
                return
            ready = mp_wait([w["conn"] for w in busy], timeout=0.2)
            now = time.time()
            for w in busy:
                key, payload = w["job"]
                if w["conn"] in ready:
                    try:
                        r = w["conn"].recv()
                    except (EOFError, OSError):
                        code = w["proc"].exitcode
                        r = _fail("worker died", f"the worker process died (exit code {code})", f"exit {code}")
                        self._restart(w)
                    w["job"] = None
                    on_result(key, r)
                elif not w["proc"].is_alive():
                    code = w["proc"].exitcode
                    self._restart(w)
                    w["job"] = None
                    on_result(key, _fail("worker died", f"the worker process died (exit code {code})",
                                         f"exit {code}"))
                elif now - w["t0"] > self.timeout:
                    self._restart(w)
                    w["job"] = None
                    on_result(key, _fail("hang", f"no result in {self.timeout:.0f} s", "timeout"))

    def close(self):
        for w in self.workers:
            try:
                w["conn"].send(None)
            except Exception:     # noqa: BLE001
                pass
        for w in self.workers:
            w["proc"].join(2)
            if w["proc"].is_alive():
                w["proc"].kill()
                w["proc"].join(2)


# ------------------------------------------------------------------------------------------ campaign


class Campaign:
    """Runs mutants `start, start+1, ...` of `seed` until `seconds` or `count`; collects distinct failures."""

    def __init__(self, seed=0, jobs=1, timeout=30.0, cxx_every=50, nvrtc_every=50, known=()):
        self.programs = corpus()
        self.seed, self.jobs, self.timeout = seed, jobs, timeout
        self.cxx_every, self.nvrtc_every = cxx_every, nvrtc_every
        self.nvrtc = nvrtc_every > 0 and _nvrtc_ok()
        self.known = list(known)
        self.counts = {"mutants": 0, "duplicates": 0, "accepted": 0, "rejected": 0, "failed": 0,
                       "cxx_checked": 0, "nvrtc_checked": 0}
        self.codes: dict[str, int] = {}
        self.failures: dict[str, dict] = {}   # signature -> first {index, path, ops, detail, text, count}
        self._seen: set[bytes] = set()
        self.on_progress = None
        self.seconds = 0.0
        self._accepted = 0

    def _jobs(self, start, count):
        i = start
        while count is None or i < start + count:
            path, text, ops = make_mutant(self.programs, self.seed, i)
            h = hashlib.blake2b(text.encode(), digest_size=16).digest()
            if h in self._seen:
                self.counts["duplicates"] += 1
                i += 1
                continue
            self._seen.add(h)
            if len(self._seen) > 2_000_000:
                self._seen.clear()
            # The C++ / NVRTC samples: every n-th mutant, decided before knowing whether it is accepted,
            # so the sample is a pure function of the index.
            cxx = self.cxx_every > 0 and i % self.cxx_every == 0
            nv = self.nvrtc and self.nvrtc_every > 0 and i % self.nvrtc_every == self.nvrtc_every // 2
            yield (i, path, ops, text), (path, text, cxx, nv)
            i += 1

    def _on_result(self, key, r):
        i, path, ops, text = key
        self.counts["mutants"] += 1
        st = r["status"]
        if st == "accepted":
            self.counts["accepted"] += 1
            self.counts["cxx_checked"] += bool(r.get("cxx"))
            self.counts["nvrtc_checked"] += bool(r.get("nvrtc"))
        elif st == "rejected":
            self.counts["rejected"] += 1
            self.codes[r["code"]] = self.codes.get(r["code"], 0) + 1
        else:
            self.counts["failed"] += 1
            # A known failure is keyed by its KNOWN_FAILURES row, so an unknown one never hides under a
            # known one of the same normalized message (and is judged on its own detail).
            row = self._known_row(dict(r, text=text))
            if row is not None:
                r = dict(r, sig=f"{r['sig']} [known row {row}]")
            f = self.failures.get(r["sig"])
            if f is None or len(text) < len(f["text"]):
                n = f["count"] if f else 0
                self.failures[r["sig"]] = {"index": i, "path": path, "ops": ops, "kind": r["kind"],
                                           "detail": r["detail"], "text": text, "count": n}
            self.failures[r["sig"]]["count"] += 1

    def run(self, seconds=None, count=None, start=0, progress=None):
        if not self.programs:
            raise SystemExit("no conformance programs found (set SLANGJIT_CONFORMANCE)")
        t0 = time.time()
        deadline = t0 + seconds if seconds else None
        pool = Pool(self.jobs, self.timeout)
        last = [t0]

        def on(key, r):
            self._on_result(key, r)
            if progress and time.time() - last[0] > progress:
                last[0] = time.time()
                self.seconds = time.time() - t0
                print(self.summary_line(self.seconds), flush=True)
                if self.on_progress:
                    self.on_progress(self)

        try:
            pool.run(self._jobs(start, count), on, deadline)
        finally:
            pool.close()
        self.seconds = time.time() - t0
        return self

    def _known_row(self, fail: dict):
        """The KNOWN_FAILURES row (item, kind, pattern on the detail[, pattern on the mutant's source])."""
        for k, row in enumerate(self.known):
            item, kind, pattern = row[:3]
            if str(item).startswith("fixed:"):
                continue                      # fixed in the compiler: no longer excuses a failure
            if fail["kind"] == kind and (re.search(pattern, fail["detail"]) or re.search(pattern, fail["sig"])) \
                    and (len(row) < 4 or re.search(row[3], fail.get("text", ""), re.S)):
                return k
        return None

    def known_item(self, sig: str, fail: dict):
        k = self._known_row(dict(fail, sig=sig))
        return None if k is None else self.known[k][0]

    def summary_line(self, secs):
        c = self.counts
        return (f"{c['mutants']} mutants in {secs:.0f} s ({c['mutants'] / max(secs, 1e-9):.1f}/s): "
                f"{c['accepted']} accepted, {c['rejected']} rejected with located diagnostics, "
                f"{c['failed']} failing ({len(self.failures)} distinct); C++ checked {c['cxx_checked']}, "
                f"NVRTC checked {c['nvrtc_checked']}; {c['duplicates']} duplicate mutants skipped")

    def report(self, limit_text=1200):
        lines = [self.summary_line(self.seconds)]
        top = sorted(self.codes.items(), key=lambda kv: -kv[1])[:12]
        lines.append("rejection codes: " + ", ".join(f"{k} x{v}" for k, v in top))
        for sig, f in sorted(self.failures.items(), key=lambda kv: -kv[1]["count"]):
            item = self.known_item(sig, f)
            tag = f"known (issue 15 item {item})" if item else "NEW"
            lines.append(f"--- [{tag}] {sig}  x{f['count']}  (mutant {f['index']} of seed {self.seed}, "
                         f"{os.path.basename(f['path'])}, {f['ops']})\n{f['detail']}")
        return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0, help="time budget (0: no limit, use --count)")
    ap.add_argument("--count", type=int, default=None, help="stop after this many mutant indices")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--start", type=int, default=0, help="first mutant index")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=30.0, help="per-mutant time limit (s)")
    ap.add_argument("--cxx-every", type=int, default=50, help="C++-compile every n-th mutant if accepted (0: never)")
    ap.add_argument("--nvrtc-every", type=int, default=50, help="NVRTC-compile every n-th mutant if accepted")
    ap.add_argument("--progress", type=float, default=60.0, help="print a summary line every so many seconds")
    ap.add_argument("--json", default=None, help="write the counts and distinct failures to this file")
    ap.add_argument("--replay", type=int, default=None, help="print mutant N of --seed and compile it")
    a = ap.parse_args(argv)
    sys.path.insert(0, ROOT)
    if a.replay is not None:
        path, text, ops = make_mutant(corpus(), a.seed, a.replay)
        print(f"// mutant {a.replay} of seed {a.seed}: {os.path.basename(path)} {ops}\n{text}")
        print(check_one(path, text, True, _nvrtc_ok()))
        return 0
    known = _known_from_test()
    c = Campaign(a.seed, a.jobs, a.timeout, a.cxx_every, a.nvrtc_every, known)

    def dump(c):
        if a.json:
            import json
            tmp = a.json + ".tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"seed": a.seed, "start": a.start, "seconds": c.seconds, "counts": c.counts,
                           "codes": c.codes, "failures": c.failures}, f, indent=1)
            os.replace(tmp, a.json)

    import signal

    def stop(signum, frame):
        STOP.append(signum)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    c.on_progress = dump
    c.run(seconds=a.seconds or None, count=a.count, start=a.start, progress=a.progress)
    print(c.report())
    dump(c)
    new = [s for s, f in c.failures.items() if not c.known_item(s, f)]
    return 1 if new else 0


def _known_from_test():
    """The known-failure list of tests/compiler/test_fuzz.py (one list for both)."""
    import importlib.util
    p = os.path.join(ROOT, "tests", "compiler", "test_fuzz.py")
    if not os.path.exists(p):
        return []
    src = open(p, encoding="utf-8").read()
    m = re.search(r"^KNOWN_FAILURES = (\[.*?^\])", src, re.S | re.M)
    if not m:
        return []
    import ast
    return [tuple(x) for x in ast.literal_eval(m.group(1))]


if __name__ == "__main__":
    sys.exit(main())
