"""Verbs over the stages: each makes requests of its own and reads the answers.

bisect.py finds the commit of the user's allocator that changed a metric and confirms
it against its parent, each decision a campaign of its own that bisect_step.py runs
until decided; bisect_budget.py
shares a bisect's time among its decisions and forecasts each from the noise measured;
tune.py races an allocator's settings (which settings exist, whether the allocator
takes them, the pasted command; the race's answer is answer's race). Whatever runs
an allocator or a build here goes through the one door (the native identity's), each
bisect decision under an identity of its own. They are called by `api`, never by the
stages below it.

May import: run, dispatchers, answer, store, allocators, stats, schemas, model, request, errors,
tomlfile, units, native, files.
Never: api, cli.
"""
