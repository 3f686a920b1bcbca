import sys

from fabriccap_devtools.cli import main

sys.exit(main())
