"""The run stage: from a request's plan to stored runs.

plan.py turns a suite, its cells and the verified allocators into `RunSpec`s (the
plan of paired, random-order blocks); campaign.py starts, resumes and drives a
campaign round by round (owner.py: one process owns it; seal.py: its plan is signed;
forecast.py: how long a verdict will take); execute.py runs one `RunSpec` and says
what its outcome means, through launch.py (the native launcher am_run and its
report), image.py (what served malloc in every process image, read by the launcher
from outside the program), runas.py (the unprivileged user the program runs as when
allocmark is root), service.py (a server and its client), capture.py (bounded
output), who.py (libam_who's reports, a cross-check) and records.py, the one reader of
what native programs write (JSON lines); machine.py records what a run ran on.

Takes: `Verified` allocators, `Workload`s and a `Store`. Gives: stored runs and the
events of a campaign. May import: stats, allocators, workloads, store, profile,
executors' protocol, model; never answer/, report/, verbs/ or the CLI.
"""
