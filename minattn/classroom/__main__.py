"""`python -m minattn.classroom COMMAND`: see cli.py."""

import sys

from .cli import main

sys.exit(main())
