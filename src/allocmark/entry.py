"""The `allocmark` command's entry point: Ctrl-C while the CLI's libraries load
(a second or so) ends quietly, as it does once a command runs."""

from __future__ import annotations

import sys


def main() -> None:
    from allocmark import interrupts  # small: nothing to interrupt yet

    try:
        with interrupts.held():  # pydantic builds its validators at import
            from allocmark import cli
    except KeyboardInterrupt:
        sys.stderr.write("interrupted while starting: nothing was run\n")
        sys.exit(130)
    cli.main()
