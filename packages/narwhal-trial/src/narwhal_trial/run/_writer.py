"""``requests.jsonl``, written by a background thread so that judging and file writes stay off the
loop.

The run loop only puts each finished offer's Outcome on a queue. The thread turns it into a
RequestRecord, appends one JSON line with a single unbuffered ``write`` (so each line is on disk as
its offer ends, and a line is never half written by this process), and keeps the records for the
summary.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from pathlib import Path

import orjson

from narwhal_trial._files import create_exclusive
from narwhal_trial.documents._records import RequestRecord
from narwhal_trial.run._judge import Outcome


class RecordWriter:
    """Appends one record per offer to a new 0600 ``path`` from its own thread."""

    def __init__(self, path: Path, judge: Callable[[Outcome], RequestRecord]) -> None:
        self._fd = create_exclusive(path)
        self._judge = judge
        self._queue: queue.SimpleQueue[Outcome | None] = queue.SimpleQueue()
        self.records: list[RequestRecord] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="narwhal-trial-writer", daemon=True)
        self._thread.start()

    def put(self, outcome: Outcome) -> None:
        """Queue one finished offer; cheap and non-blocking, safe on the hot path."""
        self._queue.put(outcome)

    def close(self) -> None:
        """Write everything queued, fsync and close the file. Idempotent."""
        if self._fd < 0:
            return
        self._queue.put(None)
        self._thread.join()
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self.error = self.error or exc
        os.close(self._fd)
        self._fd = -1

    def _loop(self) -> None:
        while True:
            outcome = self._queue.get()
            if outcome is None:
                return
            try:
                record = self._judge(outcome)
                self.records.append(record)
                if self.error is None:
                    line = orjson.dumps(record.model_dump(mode="json")) + b"\n"
                    _write_all(self._fd, line)
            except Exception as exc:
                self.error = self.error or exc


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
