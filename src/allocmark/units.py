"""Numbers with units as users write them: a duration ("1m30s"), a size ("4G"),
a fraction ("3%"). Read by suites (run/plan.py) and the command line alike; and a
size as allocmark writes it (size_text), for the report and the store's messages."""

from __future__ import annotations

import math
import re

from allocmark.errors import UserError

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text: str, option: str = "--budget") -> float:
    """ "2m", "90s", "1m30s", "1h", "45" (seconds) -> seconds; "0" or "none": no budget."""
    t = text.strip().lower()
    if t in ("0", "none", "unlimited"):
        return 0.0
    m = _DURATION.fullmatch(t)
    if not t or not m or not any(m.groups()):
        raise UserError(
            f"{option} {text!r}: expected a duration such as 2m, 90s, 1m30s or 1h "
            "(0 or none: no budget)"
        )
    h, mins, secs = (float(g) if g else 0.0 for g in m.groups())
    total = h * 3600 + mins * 60 + secs
    if total > LONGEST:  # a typo: no campaign should be left to run for weeks
        raise UserError(
            f"{option} {text!r} is more than {LONGEST // 86400:.0f} days; give e.g. 2h, "
            "or 0 for no limit"
        )
    return total


LONGEST = 30 * 86400.0


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?", re.IGNORECASE)


def parse_size(text: str, option: str = "--memory-limit") -> int:
    """ "4G", "512M", "1.5GiB", "1000000" (bytes) -> bytes (powers of 1024)."""
    m = _SIZE.fullmatch(text.strip())
    value = float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2).lower() or "_") if m else 0
    if not m or value < 1 << 20 or value > 1 << 50:
        raise UserError(f"{option} {text!r}: expected a size from 1M to 1P, such as 512M or 4G")
    return int(value)


def parse_fraction(text: str, option: str, below: float = 1.0) -> float:
    """ "2%" or "0.02" -> 0.02; it must lie above 0 and below `below`."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a percentage such as 2% or 0.02") from None
    if 0 < value < below:
        return value
    if value >= below and not text.endswith("%") and value < 100:
        hint = f"{text} is read as {value:.0%}; for {value:g} percent write {value:g}%"
    elif value == 0:
        hint = "0 can never be met"
    else:
        hint = "out of range"
    raise UserError(
        f"{option} {text!r}: {hint}; give a value above 0% and below {below:.0%}, e.g. 3% or 0.03"
    )


def size_text(n: float) -> str:
    """One decimal in the largest unit that fits: 1.7 MiB, 43.3 KiB, 512 B."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def duration(seconds: float, budget: bool = False) -> str:
    """'45 s', '12 min', '3.2 h'; `budget`: rounded up and written as --budget reads it."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{math.ceil(seconds)}s" if budget else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{math.ceil(seconds / 60)}" + ("m" if budget else " min")
    hours = math.ceil(seconds / 360) / 10 if budget else seconds / 3600
    return f"{hours:.1f}" + ("h" if budget else " h")
