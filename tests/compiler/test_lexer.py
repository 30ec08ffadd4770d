"""Lexer: token kinds, literal values, locations, operators and lexical errors."""
import pytest

from slangjit.compiler.parse.lexer import lex, tokenize
from slangjit.compiler.source import CompileError


def kinds_texts(src):
    return [(t.kind, t.text) for t in lex(src)[:-1]]


def test_identifiers_and_keywords_are_ids():
    assert kinds_texts("struct Foo_1 _x if") == [("id", "struct"), ("id", "Foo_1"), ("id", "_x"), ("id", "if")]


@pytest.mark.parametrize("src,value,suffix", [
    ("42", 42, ""), ("0x1F", 31, ""), ("0XffU", 255, "u"), ("0b1011", 11, ""), ("017", 15, ""),
    ("0", 0, ""), ("7u", 7, "u"), ("12ull", 12, "ull"), ("5LL", 5, "ll"), ("3l", 3, "l"),
    ("9z", 9, "z"), ("3000000000", 3000000000, ""), ("0xFFFFFFFFFFFFFFFFull", 2**64 - 1, "ull"),
])
def test_int_literals(src, value, suffix):
    (t, eof) = lex(src)
    assert t.kind == "int" and t.value == value and t.suffix == suffix and t.text == src
    assert eof.kind == "eof"


@pytest.mark.parametrize("src,value,suffix", [
    ("1.5", 1.5, ""), (".5f", 0.5, "f"), ("3.f", 3.0, "f"), ("1e-3", 1e-3, ""), ("1.5h", 1.5, "h"),
    ("2.0l", 2.0, "l"), ("2.5E+2F", 250.0, "f"), ("0.1lf", 0.1, "l"), ("7.", 7.0, ""), ("1e5", 1e5, ""),
])
def test_float_literals(src, value, suffix):
    (t, _) = lex(src)
    assert t.kind == "float" and t.value == value and t.suffix == suffix and t.text == src


def test_char_and_string_literals():
    toks = lex(r"""'a' '\n' "hi\t\"x\"" "" """)
    assert toks[0].kind == "int" and toks[0].value == 97
    assert toks[1].value == 10
    assert toks[2].kind == "str" and toks[2].value == 'hi\t"x"'
    assert toks[3].kind == "str" and toks[3].value == ""


def test_operators_longest_match():
    src = "<<= ... :: -> ++ -- && || == != <= >= << += -= *= /= %= &= |= ^= => ? : ; , . ~ !"
    texts = [t.text for t in lex(src)[:-1]]
    assert texts == src.split()


def test_shift_right_is_two_adjacent_gt_tokens():
    toks = lex("a >> b >>= c > > d")[:-1]
    assert [t.text for t in toks] == ["a", ">", ">", "b", ">", ">=", "c", ">", ">", "d"]
    # adjacency (space=False) distinguishes `>>` from `> >`
    assert toks[2].space is False and toks[5].space is False and toks[8].space is True


def test_locations_lines_and_columns():
    src = "int a;\n  float b; // c\n/* multi\nline */ x\n\ty"
    toks = lex(src)
    locs = {t.text: (t.loc.line, t.loc.col) for t in toks[:-1]}
    assert locs["int"] == (1, 1) and locs["a"] == (1, 5)
    assert locs["float"] == (2, 3) and locs["b"] == (2, 9)
    assert locs["x"] == (4, 9)
    assert locs["y"] == (5, 2)
    assert toks[-1].kind == "eof" and toks[-1].loc.line == 5


def test_comments_are_skipped_and_bol_flags():
    toks = lex("a // x y z\n  # b /* c */ d\n")
    assert [t.text for t in toks[:-1]] == ["a", "#", "b", "d"]
    assert toks[0].bol and toks[1].bol and not toks[2].bol


def test_backslash_newline_is_whitespace():
    toks = lex("a \\\n b")[:-1]
    assert [t.text for t in toks] == ["a", "b"]
    assert toks[1].bol is False and toks[1].loc.line == 2


def test_crlf_line_endings():
    toks = lex("a\r\nb\r\n  c")
    assert [(t.text, t.loc.line, t.loc.col) for t in toks[:-1]] == [("a", 1, 1), ("b", 2, 1), ("c", 3, 3)]


@pytest.mark.parametrize("src,line,col", [
    ("int a = 1;\nint b @ 2;", 2, 7),
    ("x = $;", 1, 5),
    ('s = "abc\n;', 1, 5),
    ("int x = 12abc;", 1, 9),
    ("a \\ b", 1, 3),
])
def test_lexical_errors(src, line, col):
    with pytest.raises(CompileError) as ei:
        lex(src)
    assert ei.value.code == "E0001"
    assert (ei.value.loc.line, ei.value.loc.col) == (line, col)


def test_unterminated_block_comment():
    with pytest.raises(CompileError) as ei:
        lex("int a;\n/* never\nclosed")
    assert ei.value.code == "E0011" and ei.value.loc.line == 2


def test_bad_tokens_are_deferred_by_tokenize():
    toks = tokenize("a @ b")
    assert [t.kind for t in toks] == ["id", "bad", "id"]


def test_lexer_many_lines():
    src = "float3 f(float3 a, int b) { return a * 2.0f + float3(b, 0x10u, 1e-3); } // c\n" * 300
    toks = lex(src)
    assert len(toks) == 25 * 300 + 1
