"""Side-by-side client benchmark: narwhal-trial's ``run`` vs AIPerf vs guidellm.

    .venv/bin/python bench/bench_clients.py              # all three rows, all three clients
    .venv/bin/python bench/bench_clients.py --quick      # smoke test, 100-300 requests a row
    .venv/bin/python bench/bench_clients.py --rows r500 --clients narwhal,aiperf

Not part of ``make test``. See ``bench/clients/cli.py`` for the method.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for `bench.clients`

from bench.clients.cli import main

if __name__ == "__main__":
    sys.exit(main())
