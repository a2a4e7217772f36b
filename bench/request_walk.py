"""Where a request goes: the walk of `api.run` through the code, measured.

A real campaign (samethread under glibc and jemalloc, four blocks, one round that
may add a fifth) runs under a profile hook that records every call of a function of
allocmark that is handed the request (`request.Request`) or the campaign's plan
(`request.CampaignPlan`) as an argument. Consecutive calls in one module are one stay;
the places are the modules stayed in; a climb is a stay in a package higher in the
layers (pyproject.toml's import contracts: cli > api > verbs > run : dispatchers > report
> answer > store > ...) than the stay before it: the request handed back up to be
handed down again. Issue 45's targets: <= 12 places, <= 2 climbs.

usage: .venv/bin/python bench/request_walk.py
"""

from __future__ import annotations

import inspect
import itertools
import re
import sys
import tempfile
import tomllib
from pathlib import Path
from types import FrameType
from typing import Any

from allocmark import api
from allocmark.request import CampaignPlan, Request

ROOT = Path(__file__).resolve().parents[1]
GENERATOR = inspect.CO_GENERATOR


def layers() -> dict[str, int]:
    """Each package's layer, 0 the highest (siblings share one)."""
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    order = next(c["layers"] for c in contracts["contracts"] if c["type"] == "layers")
    return {
        name.strip().removeprefix("allocmark."): i
        for i, layer in enumerate(order)
        for name in re.split("[:|]", layer)
    }


def carried(frame: FrameType) -> bool:
    """Is the request or the campaign's plan among the call's arguments (not as the
    `self` of its own methods)?"""
    code = frame.f_code
    names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
    return any(
        isinstance(frame.f_locals.get(n), Request | CampaignPlan) for n in names if n != "self"
    )


def walk(req: Request) -> list[str]:
    """The modules of allocmark, in call order, whose functions were handed `req` or
    its plan while `api.run` ran it."""
    calls: list[str] = []
    resumable: list[FrameType] = []  # a generator's frame: entered once, resumed often

    def hook(frame: FrameType, event: str, _: Any) -> None:
        module = frame.f_globals.get("__name__", "")
        if event != "call" or not module.startswith("allocmark.") or module == "allocmark.model":
            return
        if frame.f_code.co_flags & GENERATOR:
            if any(f is frame for f in resumable):
                return  # a resumption, not a call: the request was handed over once
            resumable.append(frame)
        if frame.f_code.co_filename == "<string>":
            return  # a dataclass's generated __init__: a record built, not a place
        if carried(frame):
            calls.append(module.removeprefix("allocmark."))

    sys.setprofile(hook)
    try:
        for _ in api.run(req):
            pass
    finally:
        sys.setprofile(None)
    return calls


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)  # the measured program's user reads nothing here, but may look
        req = Request(
            workloads=("samethread",),
            params=("count=20000", "rounds=2"),
            allocators=("glibc", "jemalloc"),
            min_blocks=4,
            max_blocks=5,
            budget_s=0,
            why="off",
            db=Path(tmp) / "walk.db",
        )
        calls = walk(req)
    stays = [m for i, m in enumerate(calls) if i == 0 or calls[i - 1] != m]
    down = stays[: stays.index(LOOP) + 1] if LOOP in stays else stays
    rounds = stays[len(down) :]
    print("the request's walk from api.run to the loop (a stay per line):")
    for s in down:
        print(f"  {s}")
    print(f"  ... then in the loop: {' > '.join(rounds) or 'nothing more'}")
    places = set(stays)
    print(f"places: {len(places)} (target <= 12): {', '.join(sorted(places))}")
    print(f"climbs on the way down: {len(climbs(down))} (target <= 2): {describe(climbs(down))}")
    print(
        f"in the loop, a return from a stage it asks (answer/): {len(climbs(rounds))}, "
        f"{len(climbs(rounds)) / max(1, rounds.count('run.rounds')):.1f} a stay of the rounds"
    )


LOOP = "run.campaign"


def climbs(stays: list[str]) -> list[tuple[str, str]]:
    """Each step from a stay to one in a higher layer (see the module's docstring)."""
    rank = layers()
    return [
        (a, b)
        for a, b in itertools.pairwise(stays)
        if rank.get(b.split(".")[0], 99) < rank.get(a.split(".")[0], 99)
    ]


def describe(found: list[tuple[str, str]]) -> str:
    return ", ".join(f"{a} -> {b}" for a, b in found) or "none"


if __name__ == "__main__":
    main()
