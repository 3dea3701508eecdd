import sys

from fusionlang.cli import main

sys.exit(main())
