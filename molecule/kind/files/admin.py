"""The emulator's admin API from inside its pod: admin.py METHOD PATH [JSON]. Prints the answer.

Run by `kubernetes.core.k8s_exec`, so the test needs no route from the controller into the
cluster (none exists on kind); the admin token stays in the pod's environment."""

import os
import sys
import urllib.error
import urllib.request

method, path = sys.argv[1], sys.argv[2]
body = sys.argv[3].encode() if len(sys.argv) > 3 else None
request = urllib.request.Request(
    "http://127.0.0.1:8080" + path,
    data=body,
    method=method,
    headers={
        "Authorization": "Bearer " + os.environ["EMULATOR_ADMIN_TOKEN"],
        "Content-Type": "application/json",
    },
)
try:
    # The scheme and host are fixed above; only the path comes from the caller.
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        sys.stdout.write(response.read().decode())
except urllib.error.HTTPError as err:
    sys.stderr.write(f"{method} {path}: {err.code} {err.read().decode()}\n")
    sys.exit(1)
