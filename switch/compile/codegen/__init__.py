"""Code generation: the elaborated, type-checked program becomes one Python module.

The module is compiled once per program (``compile()``), then executed once per switch instance
with that switch's runtime objects bound as globals. Per packet nothing walks a syntax tree:
headers are ``__slots__`` classes, parsers are ``while`` loops over state numbers, field
extraction is one ``int.from_bytes`` plus shifts, table lookups call the runtime table directly
and actions are plain functions.

Conventions of the generated code:
- P4 values: ``bit<W>`` is a Python int in ``[0, 2**W)``, ``int<W>`` an int in two's complement
  range, ``bool`` a Python bool, enums and errors ints.
- Struct/header fields are attributes named ``f_<name>``; headers carry ``_v`` (validity).
- Composite assignment is in place (``dst._set(src)``), so objects handed over by the
  architecture stay the same objects.
- Control parameters and control-level declarations are module globals (actions reach them);
  everything else is a Python local. Scalar ``out``/``inout`` parameters of actions and functions
  are returned as a tuple and written back by the caller, to l-values saved before the call,
  on return and on ``exit`` alike (P4-16 copy-in/copy-out; ``calls.bind_args``/``invoke``).
  Composite ones are passed by reference when that cannot differ from copy-in/copy-out.

Modules: ``generator`` (the :class:`CodeGen` state, dispatch and the whole module), ``emitter``
(lines of code), ``classes`` (header/struct/union/stack classes), ``expressions``,
``statements``, ``places`` (l-values evaluated once), ``effects`` (what a callee may do:
``exit``, names it reaches), ``calls`` (one rule per call kind, packet methods),
``callables`` (actions and functions), ``blocks`` (parsers, controls, tables). The architecture's externs are not here: the compile
driver passes their emitters in (:class:`ExternEmitters`).
"""

from __future__ import annotations

from switch.compile.codegen.emitter import Emitter
from switch.compile.codegen.generator import CodeGen, Emit, ExternEmitters

__all__ = ["CodeGen", "Emit", "Emitter", "ExternEmitters"]
