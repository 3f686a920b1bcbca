"""``python -m fabriccap.dashboard``: the documented entry point of the dashboard generator.

The dashboard lives in ``fabriccap.observability.dashboard``; ``make generate`` calls the same code.
"""

import sys

from fabriccap.observability.dashboard import main

if __name__ == "__main__":
    sys.exit(main())
