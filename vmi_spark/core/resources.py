"""What this process may use: its cores and its memory, as the operating system limits them.

Linux only in full; elsewhere :func:`process_cores` is ``os.cpu_count()`` and
:func:`available_memory` None (nothing is checked). A process in a control group (a
container, a YARN container, a Kubernetes pod) is held to the group's limits, which
``os.cpu_count()`` and ``/proc/meminfo`` do not show: both are read from the group
``/proc/self/cgroup`` names, under ``/sys/fs/cgroup`` (v2's unified hierarchy, or v1's
``cpu`` and ``memory`` controllers). Every function takes ``root``, a prefix of the paths
it reads, so that tests can give it a made-up ``/proc`` and ``/sys``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

__all__ = ["available_memory", "process_cores"]

#: a v1 limit at or above this is "no limit" (the kernel writes about 2^63)
_NO_LIMIT = 1 << 60


def process_cores(root: str = "/") -> int:
    """The cores this process may use, at least 1: its CPU affinity (``taskset``, a
    cpuset), no more than its control group's CPU quota rounded up to whole cores
    (``docker --cpus``, a Kubernetes CPU limit)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    quota = _cpu_quota(root)
    return max(1, min(cores, quota) if quota is not None else cores)


def available_memory(root: str = "/") -> int | None:
    """Bytes this process can still take without swapping or being killed: the machine's
    ``MemAvailable``, and no more than its control group's memory limit less the group's
    use. None where neither can be read."""
    found = [v for v in (_meminfo_available(root), _cgroup_room(root)) if v is not None]
    return min(found) if found else None


def _groups(root: str, controller: str) -> Iterator[tuple[str, str, str]]:
    """``(version, directory, controller)`` of this process's groups that may hold
    ``controller``'s files: v1's own hierarchy, then v2's unified one."""
    try:
        with open(os.path.join(root, "proc/self/cgroup"), encoding="ascii") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return
    base = os.path.join(root, "sys/fs/cgroup")
    unified = None
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, group = rest.partition(":")
        group = group.lstrip("/")
        if controllers == "":
            unified = group
        elif controller in controllers.split(","):
            yield "v1", _existing(os.path.join(base, controllers), group), controller
    if unified is not None:
        yield "v2", _existing(base, unified), controller


def _existing(mount: str, group: str) -> str:
    """The group's directory under ``mount``; the mount itself where that directory is
    not there (a container that sees only its own group, mounted at the top)."""
    d = os.path.join(mount, group)
    return d if os.path.isdir(d) else mount


def _read(path: str) -> list[str] | None:
    """The whitespace-separated words of a small file (None: unreadable)."""
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().split()
    except OSError:
        return None


def _int(words: list[str] | None) -> int | None:
    try:
        return int(words[0]) if words else None
    except ValueError:  # "max": no limit
        return None


def _cpu_quota(root: str) -> int | None:
    """The group's CPU quota in whole cores, rounded up (None: no quota)."""
    for version, d, _ in _groups(root, "cpu"):
        if version == "v1":
            quota = _int(_read(os.path.join(d, "cpu.cfs_quota_us")))
            period = _int(_read(os.path.join(d, "cpu.cfs_period_us")))
        else:
            words = _read(os.path.join(d, "cpu.max")) or []
            quota, period = _int(words[:1]), _int(words[1:2])
        if quota is not None and quota > 0 and period:
            return max(1, -(-quota // period))
    return None


def _meminfo_available(root: str) -> int | None:
    try:
        with open(os.path.join(root, "proc/meminfo"), encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _cgroup_room(root: str) -> int | None:
    """The group's memory limit less its use (None: no limit, or none readable)."""
    for version, d, _ in _groups(root, "memory"):
        names = (("memory.limit_in_bytes", "memory.usage_in_bytes") if version == "v1"
                 else ("memory.max", "memory.current"))
        limit = _int(_read(os.path.join(d, names[0])))
        if limit is not None and limit < _NO_LIMIT:
            return max(0, limit - (_int(_read(os.path.join(d, names[1]))) or 0))
    return None
