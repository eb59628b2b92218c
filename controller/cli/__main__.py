"""``python -m controller.cli``: the ``orca`` command (what the tests and the image run)."""

import sys

from controller.cli import main

sys.exit(main())
