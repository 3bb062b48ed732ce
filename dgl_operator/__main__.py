"""``python -m dgl_operator``: dglctl."""

import sys

from dgl_operator.cli import main

sys.exit(main())
