"""``python -m clusterforge.status`` (``scripts/status``)."""

import sys

from clusterforge.status.command import main

sys.exit(main())
