"""The target-specific device config (``p4_device_config``) of this software target.

For BMv2 the device config is p4c's JSON; for tailfabric's target it is the preprocessed P4
program itself, in a small JSON envelope, which the switch compiles on receipt. Nothing in it is
executed as code: the switch runs only what its own compiler generates from the P4 text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from switch.compile import CompiledProgram, _compile
from switch.errors import P4Error
from switch.lang.preprocess import preprocess_file

FORMAT = "tailfabric.p4.v1"
MAX_CONFIG_BYTES = 16 * 1024 * 1024


class DeviceConfigError(P4Error):
    """A ``p4_device_config`` that is not a tailfabric P4 program."""


def make_device_config(
    path: str | Path, include_dirs: Sequence[str] = (), defines: Mapping[str, str] | None = None
) -> bytes:
    """Preprocess ``path`` into a self-contained device config."""
    pre = preprocess_file(str(path), include_dirs, defines)
    doc = {"format": FORMAT, "name": str(path), "source": pre.text, "files": pre.files}
    return json.dumps(doc).encode()


def load_device_config(data: bytes) -> CompiledProgram:
    """Compile a device config made by :func:`make_device_config`.

    Raises:
        DeviceConfigError: the bytes are not such a config.
        P4Error: the program in it does not compile.
    """
    if len(data) > MAX_CONFIG_BYTES:
        raise DeviceConfigError(f"device config is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise DeviceConfigError(
            "p4_device_config is not a tailfabric P4 program (make one with 'tf-p4 compile'; "
            "BMv2 JSON is not accepted)"
        ) from None
    if isinstance(doc, dict) and ("pipelines" in doc or "header_types" in doc):
        raise DeviceConfigError(
            "p4_device_config is BMv2 JSON (p4c output); tf-switch compiles P4 itself: push the "
            "output of 'tf-p4 compile PROG.p4' instead"
        )
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise DeviceConfigError(
            f"p4_device_config is not a tailfabric P4 program (format is "
            f"not {FORMAT!r}; make one with 'tf-p4 compile')"
        )
    source, name, files = (
        doc.get("source"),
        doc.get("name", "<device-config>"),
        doc.get("files", {}),
    )
    if not isinstance(source, str) or not isinstance(name, str) or not isinstance(files, dict):
        raise DeviceConfigError("malformed device config")
    clean_files = {str(k): [str(x) for x in v] for k, v in files.items() if isinstance(v, list)}
    return _compile(source, name, clean_files)
