"""Process and disk sampling for the cold benchmarks (tall.py, cold_submit.py): Linux /proc.

A run's processes are the tree under the process the benchmark started; each is read
from ``/proc/PID/status`` (``VmRSS`` now, ``VmHWM`` its peak so far).
"""

from __future__ import annotations

import os


def proc_tree(root: int) -> dict[int, str]:
    """pid -> command name of ``root`` and all its descendants."""
    parent, name = {}, {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as fh:
                    text = fh.read()
            except OSError:
                continue
            pid = int(d)
            name[pid] = text[text.index("(") + 1:text.rindex(")")]
            parent[pid] = int(text.rsplit(")", 1)[1].split()[1])
    out, todo = {}, [root]
    while todo:
        p = todo.pop()
        if p in name:
            out[p] = name[p]
            todo.extend(c for c, q in parent.items() if q == p)
    return out


def status_mb(pid: int, field: str = "VmRSS") -> float:
    """``field`` of ``/proc/PID/status`` in MB (``VmRSS``, ``VmHWM``); 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def dir_bytes(root: str) -> int:
    """Bytes of the files under ``root`` (files that vanish while counted: skipped)."""
    total = 0
    for d, _, files in os.walk(root):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(d, f))
            except OSError:
                pass
    return total
