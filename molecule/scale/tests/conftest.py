import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "shared"))

from wfa_testlib import emulator, pool_token  # noqa: E402,F401 - fixtures
