# SPDX-License-Identifier: GPL-3.0-or-later
"""The core stays below everything else: no module of sapiens_blender/core imports the CLI, the
API, the Blender layer or the UI (they import the core, never the reverse), nor bpy."""

import ast

from repo_paths import REPO

CORE = REPO / "sapiens_blender" / "core"
ABOVE = {"cli", "api", "blender", "ui", "batch"}  # sapiens_blender.<these> sit above the core


def _imports(path):
    """Absolute names of everything ``path`` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[:len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            yield module
            yield from (f"{module}.{a.name}" for a in node.names)


def _above(name: str) -> bool:
    parts = name.split(".")
    return parts[0] == "bpy" or (parts[0] == "sapiens_blender" and len(parts) > 1 and parts[1] in ABOVE)


def test_no_core_module_imports_what_sits_above_it():
    found = {f"{p.relative_to(REPO)} imports {name}" for p in CORE.rglob("*.py") for name in _imports(p)
             if _above(name)}
    assert not found, sorted(found)
