"""``python -m fabriccap_devtools.celcheck MAJOR.MINOR FILE...``: the package's own command."""

import sys

from fabriccap_devtools.celcheck import main

sys.exit(main())
