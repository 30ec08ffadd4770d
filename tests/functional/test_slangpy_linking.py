"""Link-time types (SlangPy's test_linking.py): `extern struct VAL : IVal;` in one module, bound by
`export struct VAL : IVal = Val10;` in a linked module or in a call's `.prelude`, as Slang links them."""
from __future__ import annotations

import numpy as np
import pytest

import slangjit as spy
from slangjit.compiler.source import CompileError

pytestmark = pytest.mark.parametrize("device", ["cpu", "cuda"], indirect=True)

BASE = """
import "slangpy";
interface IVal { static int get(); }
extern struct VAL : IVal;
int get_value() { return VAL::get(); }
int scaled(int x) { VAL v; return x * VAL::get(); }
"""

VAL = "struct Val{n} : IVal {{ static int get() {{ return {n}; }} }}\nexport struct VAL : IVal = Val{n};\n"


def test_prelude_defines_link_time_type(device):
    m = spy.Module.load_from_source(device, "sj_link_type", BASE)
    assert m.get_value.prelude(VAL.format(n=10))() == 10
    assert m.get_value.prelude(VAL.format(n=20))() == 20
    # vectorised, one kernel per prelude
    x = np.arange(5, dtype=np.int32)
    np.testing.assert_array_equal(m.scaled.prelude(VAL.format(n=3))(x, _result="numpy"), x * 3)
    np.testing.assert_array_equal(m.scaled.prelude(VAL.format(n=7))(x, _result="numpy"), x * 7)


def test_linked_module_defines_link_time_type(device):
    lm = device.load_module_from_source("sj_link_val30", VAL.format(n=30))
    m = spy.Module.load_from_source(device, "sj_link_type2", BASE, link=[lm])
    assert m.get_value() == 30


def test_link_time_type_bound_to_a_generic_instance(device):
    src = BASE + "struct Gen<let N : int> : IVal { static int get() { return N * 2; } }\n"
    m = spy.Module.load_from_source(device, "sj_link_type3", src)
    assert m.get_value.prelude("export struct VAL : IVal = Gen<21>;\n")() == 42


def test_unbound_link_time_type_is_a_located_error(device):
    m = spy.Module.load_from_source(device, "sj_link_type4", BASE)      # loads: a link may bind it later
    with pytest.raises(Exception, match=r"E2056.*link-time type 'VAL'.*no definition"):
        m.get_value()


def test_two_definitions_of_a_link_time_type_conflict(device):
    src = BASE + VAL.format(n=1) + VAL.format(n=2)
    with pytest.raises(CompileError, match="E2004"):
        spy.Module.load_from_source(device, "sj_link_type5", src)


def test_binding_type_must_conform(device):
    m = spy.Module.load_from_source(device, "sj_link_type6", BASE)
    with pytest.raises(Exception, match=r"E3001.*'Bad' does not conform to 'IVal'.*link-time type 'VAL'"):
        m.get_value.prelude("struct Bad { int z; }\nexport struct VAL : IVal = Bad;\n")()
