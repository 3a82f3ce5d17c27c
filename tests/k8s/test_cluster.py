"""Proof that the test cluster is real Kubernetes: kubelet, containerd, CNI, kube-proxy, RBAC.

Runs against the cluster named by KUBECONFIG, or else the one `make k8s-up` brought up
(/var/tmp/workflow-agent-k8s/kubeconfig). Skipped, with the reason, only when no cluster is up.
Nothing is mocked: every assertion goes through kubectl to the API server and the kubelet.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
STABLE_KUBECONFIG = Path("/var/tmp/workflow-agent-k8s/kubeconfig")
IMAGE = os.environ.get("WFA_K8S_TEST_IMAGE", "local/debian12-plain:latest")
WAIT = "300s"  # generous: a loaded 2-core machine shared with other test runs


def _kubeconfig() -> Path | None:
    env = os.environ.get("KUBECONFIG")
    if env:
        return Path(env)
    return STABLE_KUBECONFIG if STABLE_KUBECONFIG.exists() else None


def _kubectl_binary(kubeconfig: Path) -> str | None:
    # up.sh puts the kubectl built with the cluster next to its kubeconfig.
    sibling = kubeconfig.resolve().parent / "kubectl"
    for candidate in (os.environ.get("KUBECTL"), str(sibling) if sibling.exists() else None):
        if candidate:
            return candidate
    return shutil.which("kubectl")


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.base = [binary, "--kubeconfig", str(kubeconfig)]

    def run(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [*self.base, *args], input=stdin, capture_output=True, text=True, timeout=600
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}"
            )
        return proc.stdout

    def apply(self, manifest: dict) -> None:
        self.run("apply", "-f", "-", stdin=json.dumps(manifest))


@pytest.fixture(scope="module")
def kubectl() -> Kubectl:
    kubeconfig = _kubeconfig()
    if kubeconfig is None:
        pytest.skip(f"no cluster: KUBECONFIG unset and {STABLE_KUBECONFIG} missing (make k8s-up)")
    if not kubeconfig.exists():
        pytest.skip(f"no cluster: KUBECONFIG={kubeconfig} does not exist")
    binary = _kubectl_binary(kubeconfig)
    if binary is None:
        pytest.skip("no kubectl: set KUBECTL, or bring the cluster up with make k8s-up")
    k = Kubectl(binary, kubeconfig)
    probe = subprocess.run(
        [*k.base, "get", "--raw", "/readyz"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        pytest.skip(f"cluster of {kubeconfig} is not up: {probe.stderr.strip()[:200]}")
    return k


def _load_image(kubeconfig: Path) -> None:
    k8s_dir = kubeconfig.resolve().parent  # up.sh: $STATE/k8s/kubeconfig
    if (k8s_dir / "containerd" / "containerd.sock").exists():
        env = {**os.environ, "WORKFLOW_AGENT_STATE": str(k8s_dir.parent)}
        subprocess.run(
            ["bash", str(HERE / "import-image.sh"), IMAGE], check=True, timeout=600, env=env
        )
    elif shutil.which("kind"):
        subprocess.run(["kind", "load", "docker-image", IMAGE], check=True, timeout=600)
    else:
        pytest.skip(f"cannot load {IMAGE} into a cluster that is neither ours nor kind")


@pytest.fixture(scope="module")
def namespace(kubectl: Kubectl):
    """A namespace with an `agent` ServiceAccount whose Role is what the assertions expect."""
    ns = f"wfa-k8s-test-{uuid.uuid4().hex[:8]}"
    _load_image(kubectl.kubeconfig)
    kubectl.run("create", "namespace", ns)
    try:
        kubectl.run("-n", ns, "create", "serviceaccount", "agent")
        kubectl.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "agent", "namespace": ns},
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["pods"],
                        "verbs": ["create", "get", "list", "watch", "delete"],
                    },
                    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]},
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
                ],
            }
        )
        kubectl.run("-n", ns, "create", "rolebinding", "agent", "--role=agent",
                    f"--serviceaccount={ns}:agent")  # fmt: skip
        yield ns
    finally:
        kubectl.run("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="module")
def pod(kubectl: Kubectl, namespace: str) -> str:
    kubectl.apply(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "probe", "namespace": namespace},
            "spec": {
                "serviceAccountName": "agent",
                "terminationGracePeriodSeconds": 1,
                "containers": [
                    {
                        "name": "probe",
                        "image": IMAGE,
                        "imagePullPolicy": "Never",  # imported, no registry
                        "command": ["sh", "-c", "echo wfa-k8s-probe-started; exec sleep 3600"],
                    }
                ],
            },
        }
    )
    kubectl.run("-n", namespace, "wait", "--for=condition=Ready", "pod/probe", f"--timeout={WAIT}")
    return "probe"


def test_node_is_ready_with_a_real_container_runtime(kubectl: Kubectl) -> None:
    nodes = json.loads(kubectl.run("get", "nodes", "-o", "json"))["items"]
    assert nodes, "the cluster has no node"
    node = nodes[0]
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"]
    assert ready == "True"
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")


def test_pod_from_local_image_runs(kubectl: Kubectl, namespace: str, pod: str) -> None:
    status = json.loads(kubectl.run("-n", namespace, "get", "pod", pod, "-o", "json"))["status"]
    assert status["phase"] == "Running"
    (container,) = status["containerStatuses"]
    assert container["ready"] is True
    assert container["image"].endswith(IMAGE.split("/", 1)[-1])


def test_pod_logs_are_readable(kubectl: Kubectl, namespace: str, pod: str) -> None:
    assert "wfa-k8s-probe-started" in kubectl.run("-n", namespace, "logs", pod)


def test_exec_runs_in_the_pod(kubectl: Kubectl, namespace: str, pod: str) -> None:
    out = kubectl.run("-n", namespace, "exec", pod, "--", "sh", "-c", "echo $((6*7)) $(hostname)")
    assert out.split() == ["42", pod]


# kubectl reads "pods/exec" as pod *named* exec: subresources need --subresource.
@pytest.mark.parametrize(
    ("verb", "resource", "subresource", "expected"),
    [
        ("create", "pods", "", "yes"),
        ("delete", "pods", "", "yes"),
        ("watch", "pods", "", "yes"),
        ("get", "pods", "log", "yes"),
        ("list", "configmaps", "", "yes"),
        ("create", "pods", "exec", "no"),  # not granted by the Role
        ("get", "pods", "exec", "no"),
        ("update", "pods", "", "no"),
        ("create", "configmaps", "", "no"),
        ("get", "secrets", "", "no"),
        ("create", "deployments.apps", "", "no"),
    ],
)
def test_auth_can_i_follows_the_role(
    kubectl: Kubectl, namespace: str, verb: str, resource: str, subresource: str, expected: str
) -> None:
    sa = f"system:serviceaccount:{namespace}:agent"
    args = ["auth", "can-i", verb, resource, "-n", namespace, f"--as={sa}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    assert kubectl.run(*args, check=False).strip() == expected


def test_role_does_not_reach_other_namespaces(kubectl: Kubectl, namespace: str) -> None:
    sa = f"system:serviceaccount:{namespace}:agent"
    out = kubectl.run("auth", "can-i", "list", "pods", "-n", "default", f"--as={sa}", check=False)
    assert out.strip() == "no"


IN_POD_API_CALL = """
import json, os, ssl, sys, urllib.error, urllib.request
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
url = "https://%s:%s/api/v1/namespaces/%s/" % (
    os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"],
    open(sa + "/namespace").read())
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
token = open(sa + "/token").read()
for kind in sys.argv[1:]:
    req = urllib.request.Request(url + kind, headers={"Authorization": "Bearer " + token})
    try:
        print(kind, urllib.request.urlopen(req, context=ctx, timeout=30).status)
    except urllib.error.HTTPError as e:
        print(kind, e.code)
"""


def test_pod_reaches_the_api_through_the_service_ip_with_its_token(
    kubectl: Kubectl, namespace: str, pod: str
) -> None:
    """In-cluster config, as the agent uses it: kube-proxy routes the `kubernetes` Service."""
    out = kubectl.run(
        "-n", namespace, "exec", pod, "--", "python3", "-c", IN_POD_API_CALL, "pods", "secrets"
    )
    assert dict(line.split() for line in out.splitlines()) == {"pods": "200", "secrets": "403"}


@pytest.fixture
def host_server():
    """A one-shot HTTP server on the host, standing in for the emulator."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            body = b"hello-from-host"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def test_pod_reaches_a_server_on_the_host(
    kubectl: Kubectl, namespace: str, pod: str, host_server: int
) -> None:
    """Pods reach host services at the node IP (our cluster: the bridge gateway, 10.244.0.1)."""
    node = json.loads(kubectl.run("get", "nodes", "-o", "json"))["items"][0]
    host_ip = os.environ.get("WFA_K8S_HOST_IP") or next(
        a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"
    )
    script = (
        "import urllib.request as u;"
        f"print(u.urlopen('http://{host_ip}:{host_server}/', timeout=30).read().decode())"
    )
    out = kubectl.run("-n", namespace, "exec", pod, "--", "python3", "-c", script)
    assert out.strip() == "hello-from-host"
