"""The `allocmark` command's entry point: Ctrl-C while the CLI's libraries load
(a second or so) ends quietly, as it does once a command runs."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from allocmark import cli
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting: nothing was run\n")
        sys.exit(130)
    cli.main()
