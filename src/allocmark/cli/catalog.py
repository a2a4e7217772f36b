"""The catalog verbs: allocators, alloc build, workloads, schema."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated

import typer

from allocmark.cli.app import AllocOpt, CatalogOpt, DryRunOpt, alloc_app, app, err, out


@app.command("allocators")
def allocators_cmd(
    alloc: AllocOpt = None,
    catalog: CatalogOpt = None,
    every: Annotated[
        bool, typer.Option("--all", help="a line per version not built yet, too")
    ] = False,
) -> None:
    """List the allocator catalog with what verification found on this machine."""
    from allocmark import api
    from allocmark.report import catalog as listing

    if alloc:
        listing.allocators(out(), api.verified(alloc, catalog or []))
        return
    # The whole catalog, including what allocmark can build.
    listing.catalog(out(), api.verified(None, catalog or []), every)


@alloc_app.command("build")
def alloc_build_cmd(
    names: Annotated[
        list[str] | None,
        typer.Argument(help="NAME@VERSION[+FLAVOR], FAMILY@* (every version), or FAMILY"),
    ] = None,
    build_all: Annotated[bool, typer.Option("--all", help="every recipe entry")] = False,
    force: Annotated[bool, typer.Option("--force", help="rebuild even if cached")] = False,
    catalog: CatalogOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Build allocators from their crates.io sys crates, or fetch (and build) them from
    Debian's other releases, into the cache; then verify them.
    A build that fails is listed with its reason and the rest go on (exit 1 if any failed)."""
    from allocmark import api
    from allocmark.errors import UserError

    start, failed = time.monotonic(), []
    chosen = api.to_build(names or [], build_all, catalog or [])
    if dry_run:
        out().print(
            f"dry run: would build or fetch {len(chosen)}: {', '.join(s.name for s in chosen)}; "
            "nothing was built",
            highlight=False,
            soft_wrap=True,
        )
        return
    for spec in chosen:
        try:
            built, v = api.build(spec, force, say=lambda m: err().print(f"[cyan]{m}…[/]"))
        except UserError as e:
            failed.append((spec.name, str(e)))
            err().print(f"[red]{spec.name}: build failed[/]", highlight=False)
            continue
        took = (
            f"built in {built.provenance.get('build_seconds', '?')} s"
            if built.rebuilt
            else "cached"
        )
        facts = [v.status.value, v.version or "", f"sha256 {v.sha256[:12]}" if v.sha256 else ""]
        out().print(f"{spec.name}: {' '.join(f for f in facts if f)} ({took}) {v.reason}".rstrip())
    minutes = (time.monotonic() - start) / 60
    out().print(
        f"{len(chosen) - len(failed)} of {len(chosen)} built or cached in "
        f"{minutes:.1f} min" + (f"; {len(failed)} failed:" if failed else "")
    )
    for name, why in failed:
        err().print(f"  {name}: {why}", markup=False, highlight=False)
    if failed:
        raise typer.Exit(1)


@app.command("workloads")
def workloads_cmd(
    packages: Annotated[
        bool, typer.Option("--packages", help="only print the Debian packages of the apps")
    ] = False,
) -> None:
    """List the workloads, their parameters, and which applications are installed."""
    from allocmark import api

    lines = api.workload_lines()
    if packages:
        out().print(" ".join(dict.fromkeys(p for x in lines for p in x.workload.packages)))
        return
    for x in lines:
        w, state = x.workload, ""
        if w.kind == "app":
            state = (
                f" [red]missing {', '.join(x.missing)}: {x.install_hint}[/]"
                if x.missing
                else " [green]installed[/]"
            )
        out().print(f"[bold]{w.name}[/] ({w.kind}): {w.description}{state}")
        for line in x.params:
            out().print("    " + line, markup=False, highlight=False)


@app.command("schema")
def schema_cmd(
    kind: Annotated[
        str,
        typer.Argument(
            help="suite, catalog (allocators), workloads, settings, runs (a runs export) "
            "or summary (a report's JSON)"
        ),
    ],
) -> None:
    """Print the JSON Schema of a suite, catalog, settings file, runs export or report."""
    from allocmark import api

    sys.stdout.write(json.dumps(api.json_schema(kind), indent=2) + "\n")
