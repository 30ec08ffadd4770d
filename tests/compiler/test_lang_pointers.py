"""Issue 19 group 7, pointers and optional values in differentiable code: IDifferentiablePtrType
structs with DifferentialPtrPair (a buffer with an offset, a raw pointer, offset pointers built by
a method), `RWStructuredBuffer<T>.Handle` fields, `nullptr`, `Optional<T>` / `none` as a
differentiable parameter (its Differential is Optional<T.Differential>), and `bwd_diff(p->m)(*p, ...)`.
Expected values: analytic, equal to the reference compiler's output for the same programs (where it
accepts them: it rejects a buffer where a `.Handle` is expected, which slangjit binds directly)."""
from __future__ import annotations

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

# sumOfSquares over a buffer pointer: gradients 2*v written at offset 4; Optional scale:
# bwd d/dx = 2 (value 2), d/ds = x = 3 (ps.d holds a value); with none: d/dx = 1;
# fwd with s=2, ds=1, x=3, dx=1: 2*1 + 1*3 = 5.
PTRS_OPTIONAL = """RWStructuredBuffer<float> outputBuffer;

struct MyBufferPointer : IDifferentiablePtrType
{
    typealias Differential = MyBufferPointer;
    RWStructuredBuffer<float> buf;
    uint offset;
};

[BackwardDerivative(load_bwd)]
float load(MyBufferPointer p, uint index) { return p.buf[p.offset + index]; }

void load_bwd(DifferentialPtrPair<MyBufferPointer> p, uint index, float dOut)
{
    MyBufferPointer diff_ptr = p.d;
    diff_ptr.buf[diff_ptr.offset + index] += dOut;
}

[Differentiable]
float sumOfSquares<let N : int>(MyBufferPointer p)
{
    float sos = 0.f;
    [MaxIters(N)]
    for (uint i = 0; i < N; i++)
    {
        float val_i = load(p, i);
        sos += val_i * val_i;
    }
    return sos;
}

struct DPtrFloat : IDifferentiablePtrType
{
    typealias Differential = DPtrFloat;
    float* ptr;
};

[BackwardDerivative(readp_bwd)]
float readp(DPtrFloat p, int i) { return p.ptr[i]; }
void readp_bwd(DifferentialPtrPair<DPtrFloat> p, int i, float dOut) { p.d.ptr[i] += dOut; }

[Differentiable]
float cubeAt(DPtrFloat p, int i) { let v = readp(p, i); return v * v * v; }

[Differentiable]
float maybeScale(Optional<float> s, float x)
{
    if (s.hasValue)
        return x * s.value;
    return x;
}

[numthreads(1, 1, 1)]
void computeMain()
{
    for (int i = 0; i < 4; i++) outputBuffer[i] = float(i + 1);
    MyBufferPointer p = { outputBuffer, 0 };
    MyBufferPointer d = { outputBuffer, 4 };
    var pp = DifferentialPtrPair<MyBufferPointer>(p, d);
    bwd_diff(sumOfSquares<4>)(pp, 1.0);
    outputBuffer[8] = sumOfSquares<4>(p);
    DPtrFloat a = { &outputBuffer[1] };
    DPtrFloat b = { &outputBuffer[12] };
    bwd_diff(cubeAt)(DifferentialPtrPair<DPtrFloat>(a, b), 1, 1.0);
    var px = diffPair(3.0);
    var ps = diffPair(Optional<float>(2.0));
    bwd_diff(maybeScale)(ps, px, 1.0);
    outputBuffer[9] = px.d;
    outputBuffer[13] = ps.d.hasValue ? ps.d.value : -1.0;
    var py = diffPair(3.0);
    Optional<float> nf = none;
    var pn = diffPair(nf);
    bwd_diff(maybeScale)(pn, py, 1.0);
    outputBuffer[10] = py.d;
    outputBuffer[14] = fwd_diff(maybeScale)(diffPair(Optional<float>(2.0), Optional<float>(1.0)), diffPair(3.0, 1.0)).d;
}
"""

NULLPTR = """RWStructuredBuffer<float> outputBuffer;
struct Node { float v; Node* next; }
float sumList(Node* n) { float s = 0.0; while (n != nullptr) { s += n.v; n = n.next; } return s; }
[numthreads(1, 1, 1)]
void computeMain()
{
    float* np = nullptr;
    outputBuffer[0] = (np == nullptr) ? 1.0 : 0.0;
    Node c = { 3.0, nullptr };
    Node b = { 2.0, &c };
    Node a = { 1.0, &b };
    outputBuffer[1] = sumList(&a);
    outputBuffer[2] = (a.next != nullptr) ? 1.0 : 0.0;
}
"""

HANDLE = """RWStructuredBuffer<float> outputBuffer;
struct DBuf : IDifferentiablePtrType
{
    typealias Differential = DBuf;
    RWStructuredBuffer<float>.Handle buf;
    int offset;
}
[BackwardDerivative(ld_bwd)]
float ld(DBuf p, int i) { return p.buf[p.offset + i]; }
void ld_bwd(DifferentialPtrPair<DBuf> p, int i, float dOut) { p.d.buf[p.d.offset + i] += dOut; }
[Differentiable]
float sq(DBuf p) { let v = ld(p, 0); return v * v; }
[numthreads(1, 1, 1)]
void computeMain()
{
    outputBuffer[0] = 3.0;
    DBuf a = { outputBuffer, 0 };
    DBuf b = { outputBuffer, 2 };
    bwd_diff(sq)(DifferentialPtrPair<DBuf>(a, b), 1.0);
    outputBuffer[1] = sq(a);
}
"""

OFFSET_PTRS = """RWStructuredBuffer<float> outputBuffer;
struct PF : IDifferentiablePtrType
{
    typealias Differential = PF;
    float* ptr;
    PF offset(int k) { PF r = { ptr + k }; return r; }
}
[BackwardDerivative(rd_bwd)]
float rd(PF p, int i) { return p.ptr[i]; }
void rd_bwd(DifferentialPtrPair<PF> p, int i, float dOut) { p.d.ptr[i] += dOut; }

[Differentiable]
float cubeAt(PF p, int i) { let v = rd(p, i); return v * v * v; }

[numthreads(1, 1, 1)]
void computeMain()
{
    float vals[4] = { 1.0, 2.0, 3.0, 4.0 };
    float grads[4] = { 0.0, 0.0, 0.0, 0.0 };
    PF a = { &vals[0] };
    PF b = { &grads[0] };
    bwd_diff(cubeAt)(DifferentialPtrPair<PF>(a.offset(1), b.offset(1)), 1, 1.0);
    outputBuffer[0] = grads[2];
    outputBuffer[1] = grads[1];
    outputBuffer[2] = cubeAt(a, 2);
}
"""

PTR_THIS = """RWStructuredBuffer<float> outputBuffer;
struct Sphere
{
    float r;
    [Differentiable]
    [NoDiffThis]
    float distance(float3 p) { return length(p) - r; }
}
float3 pointerGradient(Sphere* sphere, float3 p)
{
    var dp = diffPair(p);
    bwd_diff(sphere->distance)(*sphere, dp, 1.0);
    return dp.d;
}
[shader("compute")]
[numthreads(1, 1, 1)]
void computeMain()
{
    Sphere sphere = {1.0};
    float3 gradient = pointerGradient(&sphere, float3(3.0, 0.0, 0.0));
    outputBuffer[0] = gradient.x;
    outputBuffer[1] = gradient.y;
    outputBuffer[2] = gradient.z;
    // CHECK: 1.0
    // CHECK: 0.0
    // CHECK: 0.0
}
"""


@DEV
def test_ptr_pairs_and_optional(device, tmp_path):
    got = run_program(device, tmp_path, PTRS_OPTIONAL, 15, "ptropt")
    want = [1, 2, 3, 4, 2, 4, 6, 8, 30, 2, 1]
    np.testing.assert_allclose(got[:11], want)
    np.testing.assert_allclose(got[13:15], [3, 5])


@DEV
def test_nullptr(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, NULLPTR, 3, "nullptr"), [1, 6, 1])


@DEV
def test_buffer_handle_field(device, tmp_path):
    # v = 3, v^2 = 9, d/dv = 6 accumulated at offset 2
    np.testing.assert_allclose(run_program(device, tmp_path, HANDLE, 3, "handle"), [3, 9, 6])


@DEV
def test_offset_pointers_under_bwd_diff(device, tmp_path):
    # cubeAt(a + 1, 1) reads vals[2] = 3: gradient 3 * 9 = 27 lands in grads[2]
    np.testing.assert_allclose(run_program(device, tmp_path, OFFSET_PTRS, 3, "offset"), [27, 0, 27])


@DEV
def test_bwd_diff_through_pointer_method(device, tmp_path):
    np.testing.assert_allclose(run_program(device, tmp_path, PTR_THIS, 3, "ptrthis"), [1, 0, 0])


@pytest.mark.parametrize("name", ["PTRS_OPTIONAL", "NULLPTR", "HANDLE", "OFFSET_PTRS", "PTR_THIS"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())
