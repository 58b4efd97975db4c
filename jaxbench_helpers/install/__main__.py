import sys

from .step import main

sys.exit(main())
