"""`python -m minattn.course.classroom COMMAND`: see cli.py."""

import sys

from .cli import main

if __name__ == "__main__":  # importing this module (a walk over the library) runs nothing
    sys.exit(main())
