"""``python -m odeflow`` is the ``odeflow`` command."""

import sys

from odeflow.cli import main

sys.exit(main())
