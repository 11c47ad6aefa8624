# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender`: the command-line interface.

Each subcommand lives in its own module of this package and exposes
``register(subparsers)``, which adds its parser and sets ``func`` to a callable taking the
parsed arguments and returning an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys

# Subcommand modules, in the order they appear in --help.
SUBCOMMANDS = ("analyze", "build", "scan", "animate", "batch", "demo", "serve", "package_extension")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sapiens-blender",
        description="Photos of people to rigged 3D human assets with Meta's Sapiens models.",
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f".{name}", __name__).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    check = getattr(args, "check", None)  # a command's own argument rules, before any work
    problem = check(args) if check else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
