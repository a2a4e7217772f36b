"""Specs -> what a campaign runs on, in one call (`prepared`): every allocator built
where allocmark builds it (a recipe's first use, a repository's revision), verified
by the probe, and checked against the programs the campaign runs (a newer glibc than
an entry's). run/start.py calls it once, after every decision of its own (the rows,
the blocks, the size), so that it never comes back to run/ between a build and a
verification.

A revision that does not build is left out with the end of its log (as `git bisect
skip`), unless none builds; an allocator the user named that is unusable is an error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from allocmark.allocators import builder, debian, git
from allocmark.allocators.selection import baseline_name
from allocmark.allocators.verification import verify_all
from allocmark.errors import UserError
from allocmark.model import AllocatorSpec, Prepared, Verified

Say = Callable[[str], None]  # what a build tells as it goes


def prepared(
    specs: Sequence[AllocatorSpec], explicit: bool, programs: Sequence[str], say: Say
) -> Prepared:
    """`specs` built and verified; `explicit`: the user named them (an unusable one is
    then an error); `programs`: the files the campaign runs (each checked against an
    entry's glibc)."""
    usable_specs, unbuilt = _built(specs, say)
    return _judged(verify_all(usable_specs), explicit, programs, unbuilt)


def checked(specs: Sequence[AllocatorSpec], explicit: bool, programs: Sequence[str]) -> Prepared:
    """What `prepared` checks, nothing built (a dry run): every allocator whose
    library is there verified by the probe (it serves malloc), judged as a campaign
    judges it; what the first use would build is left to that build."""
    ready = [s for s in specs if not (_first_use(s) or s.git)]
    return _judged(verify_all(ready), explicit, programs, (), len(ready) < len(specs))


def _judged(
    verified: Sequence[Verified],
    explicit: bool,
    programs: Sequence[str],
    unbuilt: tuple[str, ...],
    to_build: bool = False,
) -> Prepared:
    """The verified allocators a campaign runs on: an unusable one the user named is an
    error, and so is none usable (unless some are still to be built)."""
    bad = [v for v in verified if not v.usable]
    if explicit and bad:
        v = bad[0]
        raise UserError(f"allocator {v.spec.name!r} is {v.status.value}: {v.reason}")
    usable = [v for v in verified if v.usable]
    if not usable and not to_build:
        raise UserError("no usable allocator; `allocmark allocators` lists why and how to fix")
    check_glibc(programs, [v.spec for v in usable])
    return Prepared(tuple(usable), tuple(bad), baseline_name(usable), unbuilt=unbuilt)


def first_builds(specs: Sequence[AllocatorSpec]) -> tuple[str, ...]:
    """Of `specs`, those `prepared` builds: a recipe entry the cache lacks (its first
    use), every revision of a repository (built, or found in the cache by commit)."""
    return tuple(s.name for s in specs if _first_use(s) or s.git)


def _first_use(spec: AllocatorSpec) -> bool:
    """A recipe entry whose library the cache lacks: built as it is first used."""
    return spec.recipe is not None and not builder.is_built(spec)


def _built(specs: Sequence[AllocatorSpec], say: Say) -> tuple[list[AllocatorSpec], tuple[str, ...]]:
    """The specs whose library is there now (the recipe entries the cache lacks built
    on first use, the revisions built), and why each revision left out did not build."""
    out: list[AllocatorSpec] = []
    unbuilt: list[str] = []
    for spec in specs:
        if _first_use(spec):
            builder.build(spec, say=lambda m: say(f"{m} (first use)"))
        if spec.git is not None:
            try:
                revision(spec, say)
            except git.BuildFailed as e:
                unbuilt.append(str(e))
                continue
        out.append(spec)
    named = [s for s in specs if s.git is not None]
    if named and not any(s.git is not None for s in out):
        # The revisions are what was asked: the other allocators alone answer nothing of it.
        raise UserError(
            "no revision built: " + "; ".join(unbuilt[-3:]) + f"\n(none of {len(named)}: "
            "nothing of the repository can be compared; fix --build or the revisions)"
        )
    return out, tuple(unbuilt)


def revision(spec: AllocatorSpec, say: Say) -> git.Built:
    """`spec`'s library built (or found in the cache), under the campaign's identity:
    a repository's build is its code."""
    done = git.build(spec, say)
    if not done.cached:
        say(f"built {spec.name} in {done.seconds:.1f} s")
    return done


def check_glibc(programs: Sequence[str], specs: Sequence[AllocatorSpec]) -> None:
    """A program built for a newer glibc than an entry's (glibc@2.31) cannot run under
    it: refused before any run, naming the file that needs what. allocmark's own
    programs need no check: the probe, built as they are, verified the entry."""
    for spec in specs:
        if not (glibc := spec.glibc_version):
            continue
        for program in programs:
            if why := debian.refusal(program, spec.name, glibc):
                raise UserError(why)
