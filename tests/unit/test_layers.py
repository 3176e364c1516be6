"""The import layers of README "Layout" hold: import-linter's contracts over the whole tree."""

from __future__ import annotations

import ast
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("switch", "controller", "host", "topologies", "experiments")


def test_import_layer_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(pathlib.Path(sys.executable).parent))
    assert exe, "import-linter is a dev dependency (pip install -e '.[dev]')"
    r = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    assert "0 broken" in r.stdout


def test_every_module_says_what_it_holds() -> None:
    missing = [
        str(p.relative_to(ROOT))
        for pkg in PACKAGES
        for p in sorted((ROOT / pkg).rglob("*.py"))
        if "_generated" not in p.parts and not ast.get_docstring(ast.parse(p.read_text()))
    ]
    assert missing == []
