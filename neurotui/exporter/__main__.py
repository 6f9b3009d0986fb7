import sys

from neurotui.exporter.server import main

sys.exit(main())
