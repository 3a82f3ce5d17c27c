# wfa_testlib is on pytest's pythonpath (the repository's pytest.ini).
from wfa_testlib import emulator, pool_token  # noqa: F401 - fixtures
