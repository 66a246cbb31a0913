"""``python -m raydist.recall``: the recall probe (``raydist.recall.launch``)."""

import sys

from raydist.recall.launch import cli

if __name__ == "__main__":  # importing the module (a package walk) must not start a probe
    sys.exit(cli())
