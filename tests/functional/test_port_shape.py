"""Behavioural port of SlangPy's test_shape.py: spy.Shape construction (empty, None = invalid, lists, tuples,
-1 dimensions, large), equality (with lists too), concatenation, valid / concrete, contiguous strides,
indexing, str / repr and conversions (no device needed)."""
from __future__ import annotations

from slangjit import Shape


def test_construction():
    assert Shape().valid and len(Shape()) == 0
    s = Shape(None)
    assert not s.valid and len(s) == 0
    assert Shape([]).valid and Shape([]).concrete and len(Shape([])) == 0
    s = Shape([1, 2, 3, 4])
    assert s.valid and len(s) == 4 and [s[i] for i in range(4)] == [1, 2, 3, 4]
    assert list(s.as_list()) == [1, 2, 3, 4] and s.as_tuple() == (1, 2, 3, 4)
    for n in (8, 10, 12, 100):
        s = Shape(list(range(1, n + 1)))
        assert s.valid and len(s) == n and all(s[i] == i + 1 for i in range(n))
    s = Shape((10, 20, 30))
    assert (s[0], s[1], s[2]) == (10, 20, 30)
    assert Shape([42])[0] == 42
    s = Shape([-1, 10, -1])
    assert s.valid and len(s) == 3 and not s.concrete and (s[0], s[1], s[2]) == (-1, 10, -1)
    s = Shape([0, 0, 0])
    assert s.valid and s.concrete and list(s) == [0, 0, 0]


def test_copy():
    for v in ([1, 2, 3], list(range(1, 13))):
        a = Shape(v)
        b = Shape(a.as_list())
        assert a == b and len(a) == len(b) and a.as_list() == b.as_list()


def test_equality():
    assert Shape([1, 2, 3, 4]) == Shape([1, 2, 3, 4])
    assert Shape([1, 2, 3]) != Shape([1, 2, 4])
    assert Shape([1, 2, 3]) != Shape([1, 2, 3, 4])
    assert Shape([1, 2, 3]) == [1, 2, 3] and Shape([1, 2, 3]) != [1, 2, 4]
    assert Shape(None) == Shape(None)
    assert Shape(None) != Shape([])


def test_addition():
    s = Shape([1, 2]) + Shape([3, 4])
    assert s.valid and isinstance(s, Shape) and s.as_list() == [1, 2, 3, 4]
    assert (Shape([1, 2, 3, 4, 5]) + Shape([6, 7, 8, 9, 10])).as_list() == list(range(1, 11))
    assert Shape([1, 2, 3]) + Shape([]) == Shape([1, 2, 3])


def test_properties():
    assert Shape([1, 2, 3, 4]).concrete and not Shape([1, -1, 3]).concrete and Shape([]).concrete
    assert Shape([1, 2, 3]).valid and Shape().valid and not Shape(None).valid


def test_contiguous_strides():
    assert Shape([10]).calc_contiguous_strides().as_list() == [1]
    assert Shape([3, 4]).calc_contiguous_strides().as_list() == [4, 1]
    assert Shape([2, 3, 4]).calc_contiguous_strides().as_list() == [12, 4, 1]
    st = Shape([2, 3, 4, 5, 6, 7, 8, 9, 10]).calc_contiguous_strides()
    assert st.valid and len(st) == 9 and st[8] == 1 and st[0] == 3 * 4 * 5 * 6 * 7 * 8 * 9 * 10
    st = Shape([]).calc_contiguous_strides()
    assert st.valid and len(st) == 0


def test_indexing():
    assert Shape([10, 20, 30])[-1] == 30
    assert len(Shape([1, 2, 3])) == 3 and len(Shape(list(range(10)))) == 10 and len(Shape([])) == 0


def test_str():
    assert str(Shape([1, 2, 3])) == "[1, 2, 3]"
    assert str(Shape(list(range(1, 10)))) == "[1, 2, 3, 4, 5, 6, 7, 8, 9]"
    assert str(Shape([])) == "[]"
    assert str(Shape(None)) == "[invalid]"
    assert repr(Shape([1, 2, 3])) == "[1, 2, 3]"


def test_conversion():
    s = Shape(list(range(1, 11)))
    assert isinstance(s.as_list(), list) and s.as_list() == list(range(1, 11))
    assert isinstance(s.as_tuple(), tuple) and s.as_tuple() == tuple(range(1, 11))
    assert [x for x in s.as_list()] == list(range(1, 11))
