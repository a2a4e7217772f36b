"""Facts about the machine, recorded with every campaign."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import socket
from pathlib import Path

from allocmark.model import Machine


def current() -> Machine:
    return Machine(
        hostname=socket.gethostname(),
        cpu_model=_cpu_model(),
        cores=os.cpu_count() or 0,
        kernel=platform.release(),
        glibc=os.confstr("CS_GNU_LIBC_VERSION") or "unknown",
        allocmark_version=version(),
        python=platform.python_version(),
        memory_kib=_meminfo_kib("MemTotal"),
        governor=_governor(),
        thp=_thp(),
        rss_read_error_kib=rss_read_error_kib(),
    )


def rss_read_error_kib() -> int:
    """How far one read of a process's RSS counters may be from the exact count.

    Linux (6.2 on) keeps each process's RSS in per-CPU counters: a CPU adds pages to
    its own part and folds it into the shared total only past a batch of
    max(32, 2 x CPUs) pages. `/proc/PID/statm` (the launcher's samples) and the
    high-water mark behind `ru_maxrss` (peak RSS) both read the shared total alone, so
    each may be off by up to CPUs x batch pages, and the last sample of a run may
    read above its peak by up to twice that. Both figures are stored as the kernel
    gave them; this bound is stored with the machine so that a reader can tell a
    real difference from the counters' own. (Kernels before 6.2 cached up to 64
    events per thread instead: the same order.)"""
    cpus = os.sysconf("SC_NPROCESSORS_CONF") or os.cpu_count() or 1
    batch = max(32, 2 * (os.sysconf("SC_NPROCESSORS_ONLN") or cpus))
    return cpus * batch * (os.sysconf("SC_PAGE_SIZE") // 1024)


def _thp() -> str:
    """The bracketed choice of /sys/kernel/mm/transparent_hugepage/enabled."""
    try:
        text = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    except OSError:
        return "unknown"
    chosen = [w.strip("[]") for w in text.split() if w.startswith("[")]
    return chosen[0] if chosen else "unknown"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _meminfo_kib(key: str) -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _governor() -> str:
    try:
        with open("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor") as f:
            return f.read().strip()
    except OSError:
        return "n/a"  # VMs often expose no cpufreq


def version() -> str:
    """allocmark's installed version ("0+unknown" in a source tree never installed)."""
    try:
        return importlib.metadata.version("allocmark")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
