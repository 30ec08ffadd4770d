"""Issue 19 group 8, cooperative-vector matrix operations: coopVecMatMul / coopVecMatMulAdd (row-
and column-major, transposed, tightly packed or strided, Float32 / Float16 / 8-bit integer
interpretations, byte-address and structured buffers), coopVecOuterProductAccumulate and
coopVecReduceSumAccumulate, and the products' derivatives w.r.t. the input vector in both modes
(a small two-layer network's backward pass, weight gradients accumulated with the outer product,
against numpy).  Expected values: numpy in float64; the primal products agree with the reference
compiler's CPU output for the same calls (its CPU target has no outer-product / reduce-sum, and
it does not differentiate through the products)."""
from __future__ import annotations

import numpy as np
import pytest

from lang_programs import nvrtc_compiles, run_program

DEV = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

# outputBuffer is a byte-address buffer: the program writes its matrices at byte 512 on, then
# its results from byte 0.
PRODUCTS = """RWByteAddressBuffer outputBuffer;
typealias V3 = CoopVec<float, 3>;
typealias V2 = CoopVec<float, 2>;
[numthreads(1, 1, 1)]
void computeMain()
{
    // W = [[1, 2, 3], [4, 5, 6]] row-major at 512 (stride 12), bias (0.5, 0.25) at 536
    for (int i = 0; i < 6; i++) outputBuffer.Store<float>(512 + 4 * i, float(i + 1));
    outputBuffer.Store<float>(536, 0.5); outputBuffer.Store<float>(540, 0.25);
    // the same W as halves at 600 (tightly packed), as int8 at 640
    for (int i = 0; i < 6; i++) { outputBuffer.Store<half>(600 + 2 * i, half(i + 1));
                                  outputBuffer.Store<int8_t>(640 + i, int8_t(-(i + 1))); }
    let x = V3(1.0, 2.0, 3.0);
    let y = V2(1.0, 10.0);
    var r = coopVecMatMul<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 512,
                                    CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor, false, 12);
    outputBuffer.Store<float>(0, r[0]); outputBuffer.Store<float>(4, r[1]);
    let t = coopVecMatMul<float, 3>(y, CoopVecComponentType.Float32, outputBuffer, 512,
                                    CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor, true, 0);
    outputBuffer.Store<float>(8, t[0]); outputBuffer.Store<float>(12, t[1]); outputBuffer.Store<float>(16, t[2]);
    r = coopVecMatMul<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 512,
                                CoopVecComponentType.Float32, CoopVecMatrixLayout.ColumnMajor, false, 8);
    outputBuffer.Store<float>(20, r[0]); outputBuffer.Store<float>(24, r[1]);
    r = coopVecMatMulAdd<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 512,
                                   CoopVecComponentType.Float32, outputBuffer, 536, CoopVecComponentType.Float32,
                                   CoopVecMatrixLayout.RowMajor, false, 12);
    outputBuffer.Store<float>(28, r[0]); outputBuffer.Store<float>(32, r[1]);
    r = coopVecMatMul<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 600,
                                CoopVecComponentType.Float16, CoopVecMatrixLayout.RowMajor, false, 0);
    outputBuffer.Store<float>(36, r[0]); outputBuffer.Store<float>(40, r[1]);
    r = coopVecMatMul<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 640,
                                CoopVecComponentType.SignedInt8, CoopVecMatrixLayout.RowMajor, false, 3);
    outputBuffer.Store<float>(44, r[0]); outputBuffer.Store<float>(48, r[1]);
}
"""


@DEV
def test_products_layouts_and_interpretations(device, tmp_path):
    got = run_program(device, tmp_path, PRODUCTS, 256, "cv_products")[:13]     # (256 floats: room for the matrices)
    W = np.arange(1.0, 7.0).reshape(2, 3)
    x, y = np.array([1.0, 2.0, 3.0]), np.array([1.0, 10.0])
    colmajor = np.arange(1.0, 7.0).reshape(3, 2).T          # the same 6 floats read column by column
    want = np.concatenate([W @ x, W.T @ y, colmajor @ x, W @ x + [0.5, 0.25], W @ x, -W @ x])
    np.testing.assert_allclose(got, want, rtol=1e-6)


MLP = """RWByteAddressBuffer outputBuffer;
typealias V3 = CoopVec<float, 3>;
typealias V2 = CoopVec<float, 2>;
static const int W1 = 512;     // 2x3 row-major, then bias (2)
static const int B1 = 536;
static const int W2 = 560;     // 1x2, then bias (1)
static const int B2 = 568;
static const int G = 1024;     // weight gradients: dW1 (6 floats), db1 (2), dW2 (2)

[Differentiable]
float net(V3 x)
{
    V2 h = coopVecMatMulAdd<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, W1, CoopVecComponentType.Float32,
                                      outputBuffer, B1, CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor,
                                      false, 0);
    h = tanh(h);
    CoopVec<float, 1> o = coopVecMatMulAdd<float, 1>(h, CoopVecComponentType.Float32, outputBuffer, W2,
                                                     CoopVecComponentType.Float32, outputBuffer, B2,
                                                     CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor,
                                                     false, 0);
    return o[0] * o[0];
}

[numthreads(1, 1, 1)]
void computeMain()
{
    float w1[6] = { 0.1, -0.2, 0.3, 0.5, 0.25, -0.4 };
    for (int i = 0; i < 6; i++) outputBuffer.Store<float>(W1 + 4 * i, w1[i]);
    outputBuffer.Store<float>(B1, 0.05); outputBuffer.Store<float>(B1 + 4, -0.1);
    outputBuffer.Store<float>(W2, 1.5); outputBuffer.Store<float>(W2 + 4, -0.75);
    outputBuffer.Store<float>(B2, 0.2);
    let x = V3(1.0, 2.0, 3.0);
    outputBuffer.Store<float>(0, net(x));
    var px = diffPair(x);
    bwd_diff(net)(px, 1.0);
    px.d.store(outputBuffer, 4);
    outputBuffer.Store<float>(16, fwd_diff(net)(diffPair(x, V3(0.0, 1.0, 0.0))).d);
    // the weight gradients of the first layer by hand: dW1 = (dL/dpre1) x^T, db1 = dL/dpre1
    V2 pre = coopVecMatMulAdd<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, W1,
                                        CoopVecComponentType.Float32, outputBuffer, B1, CoopVecComponentType.Float32,
                                        CoopVecMatrixLayout.RowMajor, false, 0);
    V2 h = tanh(pre);
    CoopVec<float, 1> o = coopVecMatMulAdd<float, 1>(h, CoopVecComponentType.Float32, outputBuffer, W2,
                                                     CoopVecComponentType.Float32, outputBuffer, B2,
                                                     CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor,
                                                     false, 0);
    CoopVec<float, 1> dO = CoopVec<float, 1>(2.0 * o[0]);
    V2 dH = coopVecMatMul<float, 2>(dO, CoopVecComponentType.Float32, outputBuffer, W2, CoopVecComponentType.Float32,
                                    CoopVecMatrixLayout.RowMajor, true, 0);
    V2 dPre = dH * (V2(1.0) - h * h);
    coopVecOuterProductAccumulate(dPre, x, outputBuffer, G, 0, CoopVecMatrixLayout.RowMajor,
                                  CoopVecComponentType.Float32);
    coopVecReduceSumAccumulate(dPre, outputBuffer, G + 24);
    coopVecOuterProductAccumulate(dO, h, outputBuffer, G + 32, 8, CoopVecMatrixLayout.RowMajor,
                                  CoopVecComponentType.Float32);
    for (int i = 0; i < 10; i++) outputBuffer.Store<float>(20 + 4 * i, outputBuffer.Load<float>(G + 4 * i));
}
"""


def mlp_ref(x, W1, b1, W2, b2):
    h = np.tanh(W1 @ x + b1)
    o = W2 @ h + b2
    return float(o[0] ** 2)


@DEV
def test_two_layer_network_gradients(device, tmp_path):
    got = run_program(device, tmp_path, MLP, 320, "cv_mlp")[:15]
    W1 = np.array([[0.1, -0.2, 0.3], [0.5, 0.25, -0.4]])
    b1, W2, b2 = np.array([0.05, -0.1]), np.array([[1.5, -0.75]]), np.array([0.2])
    x = np.array([1.0, 2.0, 3.0])
    h = 1e-6

    def grad(f, a):
        g = np.zeros_like(a)
        for idx in np.ndindex(a.shape):
            e = np.zeros_like(a)
            e[idx] = h
            g[idx] = (f(a + e) - f(a - e)) / (2 * h)
        return g
    gx = grad(lambda v: mlp_ref(v, W1, b1, W2, b2), x)
    want = [mlp_ref(x, W1, b1, W2, b2), *gx, gx[1],
            *grad(lambda w: mlp_ref(x, w, b1, W2, b2), W1).ravel(), *grad(lambda b: mlp_ref(x, W1, b, W2, b2), b1),
            *grad(lambda w: mlp_ref(x, W1, b1, w, b2), W2).ravel()]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


STRUCTURED = """RWStructuredBuffer<float> outputBuffer;
[Differentiable]
CoopVec<float, 2> layer(CoopVec<float, 3> x)
{
    return coopVecMatMulAdd<float, 2>(x, CoopVecComponentType.Float32, outputBuffer, 64, CoopVecComponentType.Float32,
                                      outputBuffer, 88, CoopVecComponentType.Float32, CoopVecMatrixLayout.RowMajor,
                                      false, 12);
}
[numthreads(1, 1, 1)]
void computeMain()
{
    for (int i = 0; i < 6; i++) outputBuffer[16 + i] = float(i + 1);
    outputBuffer[22] = 0.5; outputBuffer[23] = 0.25;
    let x = CoopVec<float, 3>(1.0, 2.0, 3.0);
    let r = layer(x);
    outputBuffer[0] = r[0]; outputBuffer[1] = r[1];
    var px = diffPair(x);
    bwd_diff(layer)(px, CoopVec<float, 2>(1.0, 10.0));
    outputBuffer[2] = px.d[0]; outputBuffer[3] = px.d[1]; outputBuffer[4] = px.d[2];
    let f = fwd_diff(layer)(diffPair(x, CoopVec<float, 3>(0.0, 0.0, 1.0)));
    outputBuffer[5] = f.d[0]; outputBuffer[6] = f.d[1];
    coopVecOuterProductAccumulate(CoopVec<float, 2>(1.0, 2.0), x, outputBuffer, 128, 12, CoopVecMatrixLayout.RowMajor,
                                  CoopVecComponentType.Float32);
    coopVecReduceSumAccumulate(CoopVec<float, 2>(3.0, 4.0), outputBuffer, 152);
}
"""


@DEV
def test_structured_buffers(device, tmp_path):
    got = run_program(device, tmp_path, STRUCTURED, 40, "cv_structured")
    W, b, x = np.arange(1.0, 7.0).reshape(2, 3), np.array([0.5, 0.25]), np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(got[:7], [*(W @ x + b), *(W.T @ [1.0, 10.0]), *W[:, 2]], rtol=1e-6)
    np.testing.assert_allclose(got[32:38], np.outer([1.0, 2.0], x).ravel())
    np.testing.assert_allclose(got[38:40], [3.0, 4.0])


@pytest.mark.parametrize("name", ["PRODUCTS", "MLP", "STRUCTURED"])
def test_cuda_compiles(name):
    nvrtc_compiles(globals()[name], name.lower())
