import sys

from fabriccap.cli import main

sys.exit(main())
