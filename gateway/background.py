"""Work a request starts and leaves running in the process (a KB's evaluation), by key.

Tasks are cancelled when their subject goes (`cancel_where`) and when the process
closes its services (`close`, which waits for them to finish cancelling).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Hashable
from typing import Any


class BackgroundTasks:
    """Running tasks by key; each drops out when it ends."""

    def __init__(self) -> None:
        self._tasks: dict[Hashable, asyncio.Task[None]] = {}

    def start(self, key: Hashable, work: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(work)
        self._tasks[key] = task
        task.add_done_callback(lambda _: self._tasks.pop(key, None))
        return task

    def running(self, key: Hashable) -> bool:
        return key in self._tasks

    def cancel_where(self, chosen: Callable[[Hashable], bool]) -> int:
        """Cancel every task whose key `chosen` picks; returns how many."""
        picked = [task for key, task in self._tasks.items() if chosen(key)]
        for task in picked:
            task.cancel()
        return len(picked)

    async def close(self) -> None:
        """Cancel every task and wait until each has ended."""
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
