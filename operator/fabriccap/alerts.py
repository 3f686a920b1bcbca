"""``python -m fabriccap.alerts``: the documented entry point of the alert-rule generator.

The rules live in ``fabriccap.observability.alerts``; ``make generate`` calls the same code.
"""

import sys

from fabriccap.observability.alerts import main

if __name__ == "__main__":
    sys.exit(main())
