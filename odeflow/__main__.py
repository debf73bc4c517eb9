"""``python -m odeflow`` is the ``odeflow`` command."""

import sys

from .cli import main

sys.exit(main())
