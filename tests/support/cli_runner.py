# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender ...` as a subprocess of this interpreter (what the CLI tests run)."""

import subprocess
import sys

from repo_paths import REPO


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    entry = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", entry, *map(str, args)], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=300)
