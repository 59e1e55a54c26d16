"""The engine under test and the commands measuring it run ahead of other work on the machine.

On a real deployment an engine has its own GPU host and the measuring client its own workstation.
Here vLLM's CPU server, our commands and whatever else the machine runs (CI shares it) compete for
two cores. When other work took both (two busy loops beside the tier), vLLM's API server fell so
far behind that it delivered whole streams in one burst, which no client can time, and the
profile rightly refused its cohorts. So every server and command of the tier gets nice value
``PRIORITY`` (children inherit it: vLLM's engine-core process is started later), which lets them
preempt ordinary work. Raising priority needs root (CI runs as root); elsewhere it is skipped and
the tier runs at normal priority, as before.
"""

from __future__ import annotations

import os

PRIORITY = -10


def raise_priority(pid: int) -> bool:
    """Give process ``pid`` nice value ``PRIORITY``; False when this user may not."""
    try:
        os.setpriority(os.PRIO_PROCESS, pid, PRIORITY)
    except (PermissionError, ProcessLookupError):
        return False
    return True
