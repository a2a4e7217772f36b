"""Typed errors. Only the CLI entry point prints them and picks the exit code."""


class AllocmarkError(Exception):
    """Something went wrong that is not the user's input; exit code 1."""

    exit_code = 1


class UserError(AllocmarkError):
    """Bad input: the message names the file, key or value and how to fix it."""

    exit_code = 2


class StoreError(AllocmarkError):
    """A results database that cannot be used as it is (its data stays untouched)."""

    exit_code = 2


class Interrupted(AllocmarkError):
    """Ctrl-C or SIGTERM during a campaign; finished runs are kept."""

    exit_code = 130
