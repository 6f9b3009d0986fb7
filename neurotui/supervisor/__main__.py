import sys

from neurotui.supervisor.core import main

sys.exit(main())
