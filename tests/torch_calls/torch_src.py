"""The Slang module the torch tests share (seed 000's polynomial and friends), and helpers."""
import torch

SRC = r"""
import "slangpy";

[Differentiable]
float polynomial(float a, float b, float c, float x) { return a * x * x + b * x + c; }

[Differentiable]
double polyd(double a, double b, double c, double x) { return a * x * x + b * x + c; }

[Differentiable]
double3 normalize3(double3 v) { return v / sqrt(dot(v, v)); }

[Differentiable]
float3 scale3(float3 v, float s) { return v * s; }

struct Pt : IDifferentiable { double x; double y; };

[Differentiable]
double pt_len2(Pt p, double w) { return w * (p.x * p.x + p.y * p.y) + p.x * p.y; }

[Differentiable]
double powloop(double x, int n)
{
    double r = 1.0;
    [MaxIters(16)]
    for (int i = 0; i < n; i++)
        r = r * x + sin(r);
    return r;
}

[Differentiable]
void split_out(double x, out double y, out double z) { y = x * x; z = 3.0 * x; }

[Differentiable]
void sq_inout(inout float x) { x = x * x; }

float add_f(float a, float b) { return a + b; }
int add_i(int a, int b) { return a + b; }
int64_t add_i64(int64_t a, int64_t b) { return a + b; }
int8_t add_i8(int8_t a, int8_t b) { return a + b; }
int16_t add_i16(int16_t a, int16_t b) { return a + b; }
uint8_t add_u8(uint8_t a, uint8_t b) { return a + b; }
half add_h(half a, half b) { return a + b; }
double add_d(double a, double b) { return a + b; }
bool and_b(bool a, bool b) { return a && b; }

struct Rec { float a; int n; float3 v; };
Rec make_rec(float a) { Rec r; r.a = a; r.n = 3; r.v = float3(a, 2.0 * a, 3.0 * a); return r; }

void fill_two(float x, out float y) { y = x + 1.0; }
"""


def tdev(device) -> str:
    """The torch device string matching a slangjit device."""
    return "cpu" if getattr(device, "_host_memory", True) else "cuda:0"
