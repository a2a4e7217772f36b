"""The workloads stage: what a run runs.

Takes the workload catalog (catalog/workloads.toml and the user's files) and a
suite's parameters; gives `Workload`s and the argv, environment and output parsers
of each cell (catalog.py), the generated inputs applications read (inputs.py), and
the traces the replay workload reads, checked as untrusted files and staged where a
run can read them (traces.py).

May import: model, schemas, tomlfile, errors, native, text, files.
Never: allocators, answer, api, cli, dispatchers, profile, report, run, store, verbs.
"""

from __future__ import annotations

from allocmark.workloads.catalog import (
    COMMAND,
    RUNTIME,
    apps_dir,
    builtin_catalog,
    check_command,
    command_workload,
    describe_params,
    executable,
    expand,
    expand_app,
    expand_env,
    install_hint,
    load_catalog,
    missing,
    parse_catalog,
    parse_env,
    parse_metrics,
    resolve_params,
)

__all__ = [
    "COMMAND",
    "RUNTIME",
    "apps_dir",
    "builtin_catalog",
    "check_command",
    "command_workload",
    "describe_params",
    "executable",
    "expand",
    "expand_app",
    "expand_env",
    "install_hint",
    "load_catalog",
    "missing",
    "parse_catalog",
    "parse_env",
    "parse_metrics",
    "resolve_params",
]
