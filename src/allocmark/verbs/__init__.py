"""Verbs over the stages: each makes a request of its own and reads the answer.

bisect.py finds the commit of the user's allocator that changed a metric (each step a
campaign of its own: it runs them, so it also imports run/ and executors/); tune.py
races an allocator's settings (which settings exist, whether the allocator
takes them, the race, the pasted command); harden.py is the hardening battery (its
tests, outcomes, scores and what hardening costs); tryout.py is `allocmark try`
(the user's command under the usual allocators).

May import: allocators, workloads, answer, stats, store, model (bisect.py: run/ and
executors/ too); they are called by `api`, never by the stages below it.
"""
