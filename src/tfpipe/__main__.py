"""`python -m tfpipe` runs the `tfpipe` command."""

import sys

from tfpipe.cli.parser import main

sys.exit(main())
