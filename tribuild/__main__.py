import sys

from tribuild.cli import main

sys.exit(main())
