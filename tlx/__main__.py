"""`python -m tlx ...`: see tlx/cli.py."""

import sys

from .cli import main

sys.exit(main())
