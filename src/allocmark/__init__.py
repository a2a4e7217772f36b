"""allocmark: which malloc should my program use, with which settings, and why?"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("allocmark")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
