import sys

from neurotui.cli import main

sys.exit(main())
