"""More of SlangPy's functional API: `Function.prelude` (SlangPy's test_linking.py), link-time constants
from a linked module or `.constants`."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

BASE = """
import "slangpy";
extern static const bool BOOL;
extern static const int INT;
extern static const float FLOAT;
float foo() { return BOOL ? float(INT) * FLOAT : 0.0; }
"""

SCALED = """
extern static const int K;
int scaled(int x) { return x * K; }
"""


def test_link_module_constants(device):
    im = device.load_module_from_source("sj_more_import", "export static const bool BOOL = true;\n"
                                        "export static const int INT = 10;\nexport static const float FLOAT = 42.0;\n")
    m = spy.Module.load_from_source(device, "sj_more_base", BASE, link=[im])
    assert m.foo() == 420.0
    m2 = spy.Module.load_from_source(device, "sj_more_base2", BASE)
    assert m2.foo.constants({"BOOL": True, "INT": 20, "FLOAT": 15.0})() == 300.0


def test_prelude_defines_link_time_constant(device):
    m = spy.Module.load_from_source(device, "sj_more_prelude", SCALED)
    assert m.scaled.prelude("export static const int K = 7;")(3) == 21
    five = m.scaled.prelude("export static const int K = 5;")
    np.testing.assert_array_equal(five(np.arange(4, dtype=np.int32), _result="numpy"), [0, 5, 10, 15])
    assert m.scaled.prelude("export static const int K = 7;")(2) == 14        # a different kernel per prelude


def test_prelude_errors(device):
    m = spy.Module.load_from_source(device, "sj_more_prelude_err", SCALED)
    with pytest.raises(TypeError, match="prelude: expected Slang source text"):
        m.scaled.prelude(5)
    with pytest.raises(spy.KernelGenException, match=r"sj_more_prelude_err\.slang:\d+:\d+: error"):
        m.scaled.prelude("this is not slang")(3)
