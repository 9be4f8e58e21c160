"""The `fleet-agent` command: its parser and entry point (entry.py), the
commands by group (`*_commands.py`), and the CLI's own renderings.

`main` is the console script's entry (pyproject.toml, `starter.cli:main`)."""

from starter.cli.entry import EXIT_BROKEN_PIPE, build_parser, main, run

__all__ = ["EXIT_BROKEN_PIPE", "build_parser", "main", "run"]
