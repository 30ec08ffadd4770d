"""The `slangjit` command: compile Slang to C++ (or CUDA C++) and inspect the cache."""
from __future__ import annotations

import argparse
import sys
from .compiler import SourceSpec, compile_program
from .compiler.source import CompileError


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="slangjit", description="slangjit: Slang compiler and runtime")
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile", help="compile a Slang file to C++ / CUDA C++")
    c.add_argument("file")
    c.add_argument("-e", "--entry", action="append", default=[], help="entry point (repeatable; default computeMain)")
    c.add_argument("--target", choices=["cpp", "cuda"], default="cpp")
    c.add_argument("-o", "--output", help="output file (default: stdout)")
    c.add_argument("-I", "--include", action="append", default=[], help="include / import search path")
    c.add_argument("-D", dest="defines", action="append", default=[], help="preprocessor define NAME[=VALUE]")
    args = ap.parse_args(argv)

    if args.cmd == "compile":
        try:
            prog = compile_program([SourceSpec(path=args.file)], args.entry or ["computeMain"], target=args.target,
                                   include_paths=args.include, compiler_args=["-D" + d for d in args.defines])
        except CompileError as e:
            print(str(e), file=sys.stderr)
            return 1
        except OSError as e:
            print(f"slangjit: {e}", file=sys.stderr)
            return 1
        for w in getattr(prog, "warnings", []):
            print(w.format(), file=sys.stderr)
        if args.output:
            with open(args.output, "w", encoding="utf-8") as f:
                f.write(prog.source)
        else:
            sys.stdout.write(prog.source)
        return 0
    return 2


if __name__ == "__main__":
    sys.exit(main())
