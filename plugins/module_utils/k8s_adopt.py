# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the agent_k8s role takes over from upstream's Kubernetes install (workflow_agent_k8s_adopt).

Upstream's install is what pulumi/customer-managed-workflow-agent's component makes
(kubernetes/agent.ts, index.ts): the Deployment ``workflow-agent-pool``, the Secret
``agent-secret`` (the pool token under PULUMI_AGENT_TOKEN), the ConfigMap ``agent-config``
(PULUMI_AGENT_SERVICE_URL), and the workers' service account, which carries no label and is named
only in the Deployment's env (PULUMI_AGENT_SERVICE_ACCOUNT_NAME). Pure functions over what
kubernetes.core.k8s_info returned, run by the ``k8s_plan`` action's ``adoption_*`` steps.
"""

from __future__ import absolute_import, division, print_function

import base64

__metaclass__ = type

DEPLOYMENT = "workflow-agent-pool"
SECRET = "agent-secret"  # noqa: S105 - a Secret's name
CONFIGMAP = "agent-config"
TOKEN_KEY = "PULUMI_AGENT_TOKEN"  # noqa: S105 - a key's name
URL_KEY = "PULUMI_AGENT_SERVICE_URL"
WORKER_SA_ENV = "PULUMI_AGENT_SERVICE_ACCOUNT_NAME"


def _resources(result):
    return (result or {}).get("resources") or []


def _worker_sa(deployment):
    for container in (deployment.get("spec") or {}).get("template", {}).get("spec", {}).get(
        "containers"
    ) or []:
        for env in container.get("env") or []:
            if env.get("name") == WORKER_SA_ENV and env.get("value"):
                return env["value"]
    return ""


def installs(found):
    """The k8s_info results of the Deployment ``workflow-agent-pool``, one per namespace (the
    loop's ``item`` is the namespace) -> [{namespace, worker_sa}] where one exists."""
    out = []
    for result in found or []:
        for deployment in _resources(result):
            out.append({"namespace": result.get("item"), "worker_sa": _worker_sa(deployment)})
    return out


def own_names(name):
    """This role's objects that keep what an adoption took (the release ``name``'s)."""
    return {
        "Secret": name + "-token",
        "ConfigMap": name + "-config",
        "ServiceAccount": name + "-worker",
    }


def reads(upstream, namespaces, name):
    """The objects to read: in every planned namespace this role's own token Secret, config and
    workers' service account (after an adoption, later runs find what it took there), and in each
    with upstream's install its token Secret, its ConfigMap and its workers' service account."""
    out = []
    for ns in namespaces:
        for kind, own in sorted(own_names(name).items()):
            out.append({"kind": kind, "name": own, "namespace": ns})
    for found in upstream:
        ns = found["namespace"]
        out.append({"kind": "Secret", "name": SECRET, "namespace": ns})
        out.append({"kind": "ConfigMap", "name": CONFIGMAP, "namespace": ns})
        if found["worker_sa"]:
            out.append({"kind": "ServiceAccount", "name": found["worker_sa"], "namespace": ns})
    return out


def _decoded(value):
    try:
        return base64.b64decode(value).decode("utf-8")
    except (TypeError, ValueError):
        return ""


def _unique(values):
    out = []
    for value in values:
        if value not in out:
            out.append(value)
    return out


def _service_url(config_text):
    """service_url of the agent config the chart wrote (pulumi-workflow-agent.yaml)."""
    try:
        import yaml  # the controller's PyYAML, Ansible's own dependency
    except ImportError:
        return ""
    try:
        config = yaml.safe_load(config_text or "")
    except yaml.YAMLError:
        return ""
    if not isinstance(config, dict):
        return ""
    return config.get("service_url") or ""


def settings(read, name, token_key):
    """The k8s_info results of ``reads`` (``item`` is the read) -> {tokens, urls, annotations}:
    the distinct values found. Upstream's come first; this role's own objects' only where no
    upstream install holds the setting (a later run, after the adoption)."""
    own = own_names(name)
    found = {"tokens": ([], []), "urls": ([], []), "annotations": ([], [])}
    for result in read or []:
        item = result.get("item") or {}
        kind, mine = item.get("kind"), item.get("name") == own.get(item.get("kind"))
        for obj in _resources(result):
            data = obj.get("data") or {}
            side = 1 if mine else 0
            if kind == "Secret":
                key = token_key if mine else TOKEN_KEY
                found["tokens"][side].append(_decoded(data.get(key, "")))
            elif kind == "ConfigMap":
                url = (
                    _service_url(data.get("pulumi-workflow-agent.yaml"))
                    if mine
                    else data.get(URL_KEY)
                )
                found["urls"][side].append(url or "")
            elif kind == "ServiceAccount":
                annotations = (obj.get("metadata") or {}).get("annotations") or {}
                # Helm's own bookkeeping is not the workers' identity.
                annotations = dict(
                    (k, v) for k, v in annotations.items() if not k.startswith("meta.helm.sh/")
                )
                if annotations or not mine:
                    found["annotations"][side].append(annotations)
    out = {}
    for key, (theirs, ours) in found.items():
        keep = (lambda v: v) if key != "annotations" else (lambda v: True)
        values = [v for v in _unique(theirs) if keep(v)]
        out[key] = values or [v for v in _unique(ours) if keep(v)]
    return out


def disagreements(upstream, found_settings, given):
    """One message naming what the upstream installs disagree on and the variable that settles
    it; "" when they agree (or the play sets it). ``given``: {token, service_url,
    worker_annotations} as the play sets them (falsy: not set). Never holds a token."""
    problems = []
    if len(found_settings["tokens"]) > 1 and not given.get("token"):
        problems.append(
            "their pool token (agent-secret): set workflow_agent_k8s_token, or adopt them in "
            "separate runs"
        )
    if len(found_settings["urls"]) > 1 and not given.get("service_url"):
        problems.append("their service URL (agent-config): set workflow_agent_k8s_service_url")
    if len(found_settings["annotations"]) > 1 and not given.get("worker_annotations"):
        problems.append(
            "their workers' service account annotations: set "
            "workflow_agent_k8s_worker_service_account_annotations"
        )
    if not problems:
        return ""
    names = ", ".join(found["namespace"] for found in upstream)
    return "workflow_agent_k8s_adopt: the upstream installs in %s differ in %s" % (
        names,
        "; ".join(problems),
    )
