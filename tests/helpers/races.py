"""Threads racing over the process's shared tables."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable


def race(work: Callable[[int], None], threads: int, timeout: float = 60) -> None:
    """``work(n)`` for n in ``range(threads)``, each in its own thread, switching every
    few bytecodes so that the races a lock must prevent show; joined (bounded)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        started = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for t in started:
            t.start()
        for t in started:
            t.join(timeout)
    finally:
        sys.setswitchinterval(interval)
