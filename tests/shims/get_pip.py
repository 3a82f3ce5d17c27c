"""Stand-in for get-pip.py, which ansible-test downloads from a host these machines cannot reach.

It does what get-pip does: run pip from the standard library's bundled wheel, which then installs
the requested pip from PyPI (reachable here).
"""

import ensurepip
import glob
import os
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
if not any(not a.startswith("-") for a in args):
    args.append("pip")
bundled = os.path.join(os.path.dirname(ensurepip.__file__), "_bundled", "pip-*.whl")
sys.path.insert(0, sorted(glob.glob(bundled))[-1])
from pip._internal.cli.main import main as pip_main  # noqa: E402

sys.exit(pip_main(["install", "--upgrade", "--force-reinstall", *args]))
