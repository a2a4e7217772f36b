"""Numbers with units as users write them: a duration ("1m30s"), a size ("4G"),
a fraction ("3%"). Read by suites (run/plan.py) and the command line alike; and a
size and a time as allocmark writes them (size_text, time_text), for the report, the
profile's findings and the store's messages.

One rule for every option of a kind, so that no value means two things:
- a percentage is "5%", or a fraction below 1 ("0.05"); a bare 5 is refused (it was
  read as 500 % by one option and refused as 300 % by another);
- a duration names its unit ("90s", "2m", "1h", "1m30s"), or is "0"/"none" (no
  limit); a bare 2 is refused (seconds or minutes?);
- a size is bytes or names its unit ("512M", "4G");
- an empty value is refused, never read as "not given"."""

from __future__ import annotations

import math
import re

from allocmark.errors import UserError

_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text: str, option: str = "--budget") -> float:
    """ "2m", "90s", "1m30s", "1h" -> seconds; "0" or "none": no budget. A number
    without a unit is refused: seconds or minutes, the reader cannot tell."""
    t = text.strip().lower()
    if t in ("0", "none", "unlimited"):
        return 0.0
    m = _DURATION.fullmatch(t)
    if t and m and any(m.groups()) and not t[-1].isalpha():
        raise UserError(
            f"{option} {text!r}: a duration needs its unit: write {t}s for seconds or "
            f"{t}m for minutes (0 or none: no budget)"
        )
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
    """ "2%" or "0.02" -> 0.02; it must lie above 0 and below `below`. A bare number
    of 1 or more is refused whatever `below` is: "5" is 5 %, or 500 %?"""
    text = text.strip()
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise UserError(f"{option} {text!r}: expected a percentage such as 2% or 0.02") from None
    if not math.isfinite(value):
        raise UserError(f"{option} {text!r}: expected a percentage such as 2% or 0.02")
    if value >= 1 and not text.endswith("%"):
        raise UserError(
            f"{option} {text!r}: a bare number is a fraction (0.05 is 5%); for {value:g} "
            f"percent write {value:g}%"
        )
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


def time_text(s: float) -> str:
    """Three significant digits, trailing zeros kept: 12.3 ms, 1.50 s, 25.0 s, 250 s."""
    if s < 1:
        return f"{s * 1000:.1f} ms"
    return f"{s:.2f} s" if s < 10 else f"{s:.1f} s" if s < 100 else f"{s:.0f} s"


def duration(seconds: float, budget: bool = False) -> str:
    """'45 s', '12 min', '3.2 h'; `budget`: rounded up and written as --budget reads it."""
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{math.ceil(seconds)}s" if budget else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{math.ceil(seconds / 60)}" + ("m" if budget else " min")
    hours = math.ceil(seconds / 360) / 10 if budget else seconds / 3600
    return f"{hours:.1f}" + ("h" if budget else " h")
