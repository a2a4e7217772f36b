"""The run stage: from a request to stored runs.

start.py makes a request's campaign: its suite (suites.py) and rows, its allocators
(built and verified in one call to the allocators stage), its `CampaignPlan`, and
its plan of paired, random-order blocks of `RunSpec`s (plan.py), stored at once.
campaign.py is the loop that runs it, round by round: rounds.py adds blocks to
undecided rows within the budget, setupruns.py covers measured runs with their
verification and baseline runs, firstrun.py stops a `try` whose command fails,
whypass.py plans the profiled blocks that say why; resume.py checks a stored
campaign before the loop picks it up again. execute.py runs one `RunSpec` and says
what its outcome means, through launch.py (the native launcher am_run and its
report), image.py (what served malloc in every process image, read by the launcher
from outside the program), runas.py (what the identity the program runs as must not
reach: the guard, by real paths), service.py (a server and its client), capture.py
(bounded output), who.py (libam_who's reports, a cross-check), kernel.py (whether
the kernel can count a run's system calls) and record.py (a recorded run: the
recorder in front of the allocator, its recording made into a trace); machine.py
records what a run ran on.

Takes: a `Request`, `Workload`s and a `Store`. Gives: stored runs and the events of a
campaign.
May import: dispatchers, answer, store, profile, allocators, workloads, native, stats,
schemas, model, request, errors, defaults, text, tomlfile, units, labels, files.
Never: api, cli, verbs.
"""
