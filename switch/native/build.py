"""Build the generated C with the system compiler through cffi, once per program and machine.

The shared object goes to a cache directory keyed by a hash of the generated source, cffi's and
Python's versions (``$TF_NATIVE_CACHE``, else ``~/.cache/tailfabric/native``), so a program is
compiled once and every later process (tests, switches of a fabric) loads it in milliseconds.
A build is written under a temporary name and renamed, so concurrent builders do not collide.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.machinery
import importlib.util
import io
import os
import platform
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

from switch.native.runtime_c import CDEF

CFLAGS = ["-O2", "-fno-strict-aliasing", "-w"]


class BuildError(Exception):
    """The C compiler (or cffi) is missing, or the generated code did not compile."""


def cache_dir() -> Path:
    env = os.environ.get("TF_NATIVE_CACHE")
    if env:
        return Path(env)
    return Path.home() / ".cache" / "tailfabric" / "native"


def _key(source: str, cdef: str = CDEF) -> str:
    cffi = _cffi()
    h = hashlib.sha256()
    for part in (source, cdef, " ".join(CFLAGS), cffi.__version__, sys.version, platform.machine()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:24]


def compiled(
    prefix: str, source: str, cdef: str, root: Path | None = None, what: str = "the generated C"
) -> ModuleType:
    """The cffi module of ``source`` declared by ``cdef``, named ``<prefix><key>`` and cached in
    ``root`` (default :func:`cache_dir`): compiled now unless cached, then loaded.

    Raises:
        BuildError: no compiler, or ``what`` did not compile or load (the message says why).
    """
    name = f"{prefix}{_key(source, cdef)}"
    root = root if root is not None else cache_dir()
    target = root / f"{name}{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    if not target.exists():
        _compile(name, source, cdef, root, target, what)
    spec = importlib.util.spec_from_file_location(name, target)
    if spec is None or spec.loader is None:
        raise BuildError(f"cannot load {target}")
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except ImportError as e:
        raise BuildError(f"cannot load {target}: {e}") from None
    return mod


_loaded: dict[str, ModuleType] = {}


def build(source: str, directory: Path | None = None) -> ModuleType:
    """The compiled cffi module of ``source`` (built now unless cached); its ``ffi`` and ``lib``.

    Raises:
        BuildError: no compiler, or the source did not compile (the message says why).
    """
    key = _key(source)
    if key in _loaded:
        return _loaded[key]
    mod = compiled("_tf_native_", source, CDEF, directory)
    _register_callbacks(mod)
    _loaded[key] = mod
    return mod


def _cffi() -> Any:
    try:
        return importlib.import_module("cffi")
    except ImportError as e:  # a dependency, but the Python executor works without it
        raise BuildError(f"cffi is not installed ({e})") from None


def _compile(name: str, source: str, cdef: str, root: Path, target: Path, what: str) -> None:
    cffi = _cffi()
    if shutil.which(os.environ.get("CC", "gcc")) is None and shutil.which("cc") is None:
        raise BuildError("no C compiler (gcc/cc) on PATH")
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BuildError(f"cannot create the cache directory {root}: {e}") from None
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    ffi.set_source(name, source, extra_compile_args=CFLAGS)
    with tempfile.TemporaryDirectory(dir=root, prefix=".build-") as tmp:
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
                built = ffi.compile(tmpdir=tmp, verbose=False)
        except Exception as e:  # distutils' CompileError, LinkError, cffi's VerificationError
            raise BuildError(f"{what} did not build: {e}") from None
        os.replace(built, target)


def _register_callbacks(mod: ModuleType) -> None:
    """The ``extern "Python"`` functions the generated code calls back."""
    ffi: Any = mod.ffi

    def _random(handle: Any, lo: int, hi: int) -> int:
        sw = ffi.from_handle(handle)
        return int(sw.rt.random(lo, hi))

    ffi.def_extern(name="tf_py_random")(_random)
