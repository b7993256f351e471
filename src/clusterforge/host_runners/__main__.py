"""The hosts' entry: ``python3 -I <dir>/host_runners/__main__.py RUNNER [config.json]``,
RUNNER one of :data:`RUNNERS`; on the control node ``python -m clusterforge.host_runners``.

``-I`` (what the units run) keeps the environment, the user's site directory and the
script's own directory off ``sys.path``, so run as a file this module puts its package's
parent there itself, and imports the runner through the package (its modules import each
other relatively). That parent is the role's directory for the runner alone, root's and
0755, so nothing a user may write is put on the path.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

RUNNERS = ("snapshots", "lifecycle")


def _package_run_as_file() -> str:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.dirname(here))
    return os.path.basename(here)


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in RUNNERS:
        print(f"usage: host_runners {{{'|'.join(RUNNERS)}}} [config.json]", file=sys.stderr)
        return 2
    package = __package__ or _package_run_as_file()
    runner = importlib.import_module(f"{package}.{argv[0]}")
    return int(runner.main(list(argv[1:])))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
