"""The IR clean-up passes: constant folding and dead-code elimination (visible in the C++)."""
from slangjit.compiler import SourceSpec, compile_program


def cpp(src: str) -> str:
    return compile_program([SourceSpec(text=src, name="passes")], ["computeMain"]).source


def body_of(source: str, name: str) -> str:
    import re
    m = re.search(re.escape(name) + r"_\d+\([^;{]*\)\n\{", source)   # the definition, not the prototype
    start = m.end() - 1
    depth, i = 0, start
    while True:
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        i += 1
        if depth == 0:
            return source[start:i]


def test_constant_folding_and_dead_branches():
    src = """
RWStructuredBuffer<int> outputBuffer;
static const int K = 6;
int f(int x)
{
    int unused = 123;
    if (K * 2 > 10) { return x + (K << 2) - 3 * 7; } else { return -x; }
    return 99;
}
[numthreads(1,1,1)]
void computeMain(uint3 tid : SV_DispatchThreadID) { outputBuffer[0] = f(int(tid.x)); }
"""
    body = body_of(cpp(src), "static int32_t f")
    assert "24" in body and "21" in body          # K << 2 and 3 * 7 folded
    assert "-x" not in body.replace(" ", "")       # the dead else-branch is gone
    assert "99" not in body                        # unreachable after return
    assert "unused" not in body                    # a never-read local is dropped
