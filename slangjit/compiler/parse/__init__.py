"""Stage 1 of the compiler: Slang text -> syntax tree.

    lexer.py (tokens) -> preprocessor.py (macros, #include, conditionals) -> parser.py (+ parse_base /
    parse_exprs / parse_stmts) -> ast.py (the syntax tree: one `Module` per source file)
"""
