import sys

from workflow_emulator.cli import main

sys.exit(main())
