"""The P4-16 language front-end: preprocessor, lexer, syntax tree, parser, type checker
(``typecheck``) and constant folding (``constfold``)."""
