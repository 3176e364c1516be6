"""User-declared extern functions, implemented in Python modules loaded at start.

A P4 program may declare an extern function of its own, ``extern bit<8> f(in bit<8> x);``. BMv2
runs such functions from a C++ module given to ``simple_switch --load-modules``; this target runs
them from Python modules given to ``tf-switch --load-modules MOD`` or
``tf-p4 stf --load-modules MOD`` (a path to a ``.py`` file, or a dotted module name found on
``sys.path`` or under the current directory). Importing the module
registers the implementations by name::

    from switch.pipeline.extern_modules import register_extern_function

    def f(x: int) -> int:          # extern bit<8> f(in bit<8> x);
        return (x + 1) & 0xff

    register_extern_function("f", f)

The calling convention, for a P4 signature ``R f(d1 T1 p1, ..., dn Tn pn)``:

* the implementation is called with one positional argument per parameter, in order: the value
  of the argument for ``in`` (and directionless) and ``inout`` parameters, the type's default
  value (0 or False) for ``out`` parameters. ``bit<W>`` values are ints in ``[0, 2**W)``,
  ``int<W>`` values ints in ``[-2**(W-1), 2**(W-1))``, ``bool`` values bools, a serializable
  enum its underlying value;
* it returns the result (when ``R`` is not ``void``) followed by the new values of the ``out``
  and ``inout`` parameters, in parameter order, as a tuple; a single value may be returned bare
  and nothing as ``None``. Every value must fit its type: a value that does not, a missing
  value, or an exception raised by the implementation is reported as an
  :class:`ExternFunctionError` naming the function. ``out``/``inout`` arguments are copied back
  after the call (P4-16 "Calling convention: call by copy in / copy out").

A program that calls an extern function no loaded module registers is refused when it is loaded
into a switch, with an error naming the function and where it is declared. Only scalar
parameter and result types (``bit<W>``, ``int<W>``, ``bool``, serializable enums) can cross into
Python; the compiler refuses the others.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from switch.errors import P4Error, Span

__all__ = [
    "ExternFunctionError",
    "register_extern_function",
    "unregister_extern_function",
    "registered_extern_functions",
    "load_extern_modules",
    "bind_extern_function",
]

ExternImpl = Callable[..., Any]

_REGISTRY: dict[str, ExternImpl] = {}

TypeSpec = tuple[str, int]
"""A scalar type as the generated code describes it: ("bit", W), ("int", W) or ("bool", 1)."""


class ExternFunctionError(P4Error):
    """An extern function without an implementation, a module that cannot be loaded, or an
    implementation that misbehaved (raised, returned a value that does not fit)."""


def register_extern_function(name: str, fn: ExternImpl) -> None:
    """Make ``fn`` the implementation of the P4 extern function ``name`` (replacing any
    earlier one)."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ExternFunctionError(f"extern function name must be an identifier, not {name!r}")
    if not callable(fn):
        raise ExternFunctionError(f"the implementation of extern function '{name}' is not callable")
    _REGISTRY[name] = fn


def unregister_extern_function(name: str) -> None:
    """Forget the implementation of ``name`` (no error if there is none)."""
    _REGISTRY.pop(name, None)


def registered_extern_functions() -> list[str]:
    """The names with an implementation, sorted."""
    return sorted(_REGISTRY)


def load_extern_modules(specs: Sequence[str]) -> None:
    """Import each module of ``specs`` (a path to a ``.py`` file, or a dotted module name);
    importing it registers its extern functions.

    Raises:
        ExternFunctionError: a module that does not exist or fails to import.
    """
    for spec in specs:
        _load_one(spec)


def _load_one(spec: str) -> None:
    if spec.endswith(".py") or "/" in spec or Path(spec).is_file():
        path = Path(spec)
        if not path.is_file():
            raise ExternFunctionError(f"--load-modules {spec}: no such file")
        name = f"tf_extern_module_{path.stem}_{abs(hash(str(path.resolve())))}"
        mspec = importlib.util.spec_from_file_location(name, path)
        if mspec is None or mspec.loader is None:
            raise ExternFunctionError(f"--load-modules {spec}: not a Python module")
        module = importlib.util.module_from_spec(mspec)
        sys.modules[name] = module
        try:
            mspec.loader.exec_module(module)
        except Exception as err:  # the user's module: report it, whatever it raised
            sys.modules.pop(name, None)
            raise ExternFunctionError(
                f"--load-modules {spec}: {type(err).__name__}: {err}"
            ) from err
        return
    if "" not in sys.path and str(Path.cwd()) not in sys.path:
        sys.path.append(str(Path.cwd()))  # a dotted name may be relative to where we run, as -m
    try:
        importlib.import_module(spec)
    except Exception as err:  # ModuleNotFoundError or the module's own failure
        raise ExternFunctionError(f"--load-modules {spec}: {type(err).__name__}: {err}") from err


def _fits(v: Any, t: TypeSpec) -> bool:
    kind, width = t
    if kind == "bool":
        return isinstance(v, bool)
    if not isinstance(v, int) or isinstance(v, bool):
        return False
    if kind == "bit":
        return 0 <= v < (1 << width)
    return -(1 << (width - 1)) <= v < (1 << (width - 1))


def _type_text(t: TypeSpec) -> str:
    return "bool" if t[0] == "bool" else f"{t[0]}<{t[1]}>"


def bind_extern_function(
    name: str,
    params: Sequence[tuple[str, str, TypeSpec]],
    result: TypeSpec | None,
    where: tuple[str, int, int, str],
) -> Callable[..., Any]:
    """The callable the generated code calls for the extern function ``name``: it passes the
    arguments to the registered implementation and checks what comes back, returning the
    result and the ``out``/``inout`` values in the generated code's layout (``(result, outs...)``
    when there are outs, else the result).

    ``params`` are (name, direction, type) and ``where`` the declaration's (file, line, column, source line).

    Raises:
        ExternFunctionError: no loaded module registers ``name``.
    """
    fn = _REGISTRY.get(name)
    if fn is None:
        file, line, col, text = where
        loaded = ", ".join(registered_extern_functions()) or "none"
        raise ExternFunctionError(
            f"extern function '{name}' has no implementation: load a Python module that "
            f"registers it (tf-switch / tf-p4 stf --load-modules MOD, see "
            f"switch/pipeline/extern_modules.py; registered: {loaded})",
            Span(file, line, col, text),
        )
    outs = [(p, t) for p, d, t in params if d in ("out", "inout")]
    expected: list[tuple[str, TypeSpec]] = ([("result", result)] if result else []) + [
        (f"{d} parameter '{p}'", t) for p, d, t in params if d in ("out", "inout")
    ]
    n = len(expected)

    def call(*args: Any) -> Any:
        try:
            got = fn(*args)
        except Exception as err:  # the user's code: report it, naming the function
            raise ExternFunctionError(
                f"extern function '{name}' raised {type(err).__name__}: {err}"
            ) from err
        if n == 0:
            return None
        values = got if isinstance(got, tuple) else (got,)
        if len(values) != n:
            raise ExternFunctionError(
                f"extern function '{name}' returned {len(values)} value(s), expected {n} "
                f"({', '.join(w for w, _ in expected)})"
            )
        for v, (what, t) in zip(values, expected):
            if not _fits(v, t):
                raise ExternFunctionError(
                    f"extern function '{name}' returned {v!r} for its {what}, "
                    f"which is not a {_type_text(t)}"
                )
        if not outs:
            return values[0]
        return values

    return call
