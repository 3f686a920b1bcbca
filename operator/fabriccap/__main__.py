import sys

from fabriccap.cli.commands import main

sys.exit(main())
