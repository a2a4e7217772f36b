"""allocmark: which malloc should my program use, with which settings, and why?

Nothing runs on import (the version is `allocmark.run.machine.version()`): Ctrl-C
while the command starts must land in code that catches it (entry.py)."""
