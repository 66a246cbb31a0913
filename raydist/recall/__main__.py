"""``python -m raydist.recall``: the recall probe (``raydist.recall.launch``)."""

import sys

from raydist.recall.launch import cli

sys.exit(cli())
