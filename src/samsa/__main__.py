"""``python -m samsa``: the ``samsa`` command."""

import sys

from samsa.cli.main import main

sys.exit(main())
