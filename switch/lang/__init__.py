"""The P4-16 language front-end: preprocessor, lexer, syntax tree and parser."""
