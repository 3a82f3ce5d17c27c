# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The agent_k8s role's variables as the values of the workflow-agent chart, per namespace.

A pure function with no Ansible imports (the ``k8s_plan`` action's step ``chart_values`` runs
it): the one place where a role variable becomes a chart value (charts/workflow-agent/values.yaml
documents the values). What only the role does stays out of the values:

- The pool token never becomes a value (Helm would keep it in the release and
  kubernetes.core.helm would return it): the role applies the token Secret itself, or reads the
  user's, and passes ``existingSecret`` and a digest of its data (``existingSecretChecksum``,
  computed by the role under no_log) that rolls the pods when the token changes.
- The proxy URLs may carry credentials: the same, through ``proxy.existingSecret``.
- The replicas come from the role's namespace plan (module_utils/k8s_namespaces.py).

``workflow_agent_k8s_chart_values`` reaches the chart values the role has no variable for
(``networkPolicy``, ``prometheusRule``, ...); a value the role sets from its own variables is
refused there, so that each value has one way in.
"""

from __future__ import absolute_import, division, print_function

import copy
from collections.abc import Mapping

__metaclass__ = type

PREFIX = "workflow_agent_k8s_"
# Values the role sets as a whole (a dict or list from one variable): chart_values may not reach
# inside them.
_WHOLE = (
    ("config",),
    ("env",),
    ("labels",),
    ("podAnnotations",),
    ("resources",),
    ("nodeSelector",),
    ("tolerations",),
    ("affinity",),
    ("image", "pullSecrets"),
    ("autoscaling", "hpaMetrics"),
    ("autoscaling", "kedaTriggers"),
    ("service", "annotations"),
    ("worker", "serviceAccountAnnotations"),
    ("worker", "imagePullSecrets"),
    ("worker", "pod"),
)


def secret_names(name):
    """The Secrets the role itself applies in each namespace (the chart makes none of them)."""
    return {"token": name + "-token", "proxy": name + "-proxy"}


def proxy_secret_data(proxy):
    """``workflow_agent_k8s_proxy`` -> the proxy Secret's data (the URLs, which may carry
    credentials; the chart sets both spellings from these keys). Empty: no proxy Secret."""
    proxy = proxy or {}
    return dict((key.upper() + "_PROXY", proxy[key]) for key in ("http", "https") if proxy.get(key))


def split_image(ref):
    """``registry/repo:tag`` or ``registry/repo@sha256:...`` -> (repository, tag); no tag: "",
    which the chart reads as its appVersion (the collection's agent version)."""
    ref = str(ref or "")
    if "@" in ref:
        repository, digest = ref.split("@", 1)
        return repository, "@" + digest
    last = ref.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = ref.rsplit(":", 1)
        return repository, tag
    return ref, ""


def _leaves(values, path=()):
    """The paths the role sets: dicts are walked, except the ones it sets whole."""
    if isinstance(values, Mapping) and values and path not in _WHOLE:
        return [leaf for key, value in values.items() for leaf in _leaves(value, path + (key,))]
    return [path]


def _merge(base, extra):
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _common(settings):
    """The values every namespace shares; ``settings``: role variable name -> value."""

    def var(name):
        return settings.get(PREFIX + name)

    name = var("name")
    names = secret_names(name)
    repository, tag = split_image(var("image"))
    proxy = var("proxy") or {}
    return {
        "image": {
            "repository": repository,
            "tag": tag,
            "pullPolicy": var("image_pull_policy"),
            "pullSecrets": list(var("image_pull_secrets") or []),
        },
        "slots": int(var("slots")),
        "existingSecret": var("existing_secret") or names["token"],
        "tokenSecretKey": var("token_secret_key"),
        "serviceUrl": var("service_url") or "",
        "drainTimeout": str(var("drain_timeout")),
        "terminationGraceMargin": int(var("termination_grace_margin")),
        "config": dict(var("config") or {}),
        "port": int(var("port")),
        # Environment values are strings; YAML would make `1` or `true` something else.
        "env": dict((k, str(v)) for k, v in (var("env") or {}).items()),
        "caBundle": var("ca_bundle") or "",
        "proxy": {
            "noProxy": proxy.get("no_proxy") or "",
            "existingSecret": names["proxy"] if proxy_secret_data(proxy) else "",
        },
        "podIds": bool(var("pod_ids")),
        "labels": dict(var("labels") or {}),
        "podAnnotations": dict(var("pod_annotations") or {}),
        "resources": var("resources") or {},
        "nodeSelector": dict(var("node_selector") or {}),
        "tolerations": list(var("tolerations") or []),
        "affinity": dict(var("affinity") or {}),
        "pdb": {"maxUnavailable": var("pdb_max_unavailable")},
        "service": {
            "annotations": dict(var("service_annotations") or {}),
            "prometheusAnnotations": bool(var("prometheus_annotations")),
        },
        "prometheusPodAnnotations": bool(var("prometheus_pod_annotations")),
        "serviceMonitor": {"enabled": bool(var("service_monitor"))},
        "autoscaling": {
            "mode": var("autoscaling"),
            "maxReplicas": var("max_replicas"),
            "hpaMetrics": list(var("hpa_metrics") or []),
            "kedaTriggers": list(var("keda_triggers") or []),
        },
        "worker": {
            "serviceAccountAnnotations": dict(var("worker_service_account_annotations") or {}),
            "automountToken": bool(var("worker_automount_token")),
            "imagePullSecrets": list(var("worker_image_pull_secrets") or []),
            "pod": dict(var("worker_pod") or {}),
            "cpu": str(var("worker_cpu") or ""),
            "memory": str(var("worker_memory") or ""),
            "imagePullPolicy": var("worker_image_pull_policy") or "",
        },
    }


def _problems(settings, common):
    problems = []
    if not settings.get(PREFIX + "image"):
        problems.append(
            "workflow_agent_k8s_image is required: the agent image in a registry your cluster "
            "can pull from, e.g. registry.example.com/workflow-agent:0.1.0 (the README's "
            "'Build and push the agent image' makes one)"
        )
    extra = settings.get(PREFIX + "chart_values") or {}
    if not isinstance(extra, Mapping):
        return problems + ["workflow_agent_k8s_chart_values must be a dict of chart values"]
    role_paths = set(_leaves(common)) | {("replicas",), ("autoscaling", "minReplicas")}
    # The chart's own token and proxy Secrets would put credentials into the release's values.
    role_paths |= {("token",), ("proxy", "http"), ("proxy", "https"), ("existingSecretChecksum",)}
    taken = sorted(
        ".".join(str(p) for p in path)
        for path in set(_leaves(extra))
        if path and any(path[: len(r)] == r or r[: len(path)] == path for r in role_paths)
    )
    if taken:
        problems.append(
            "workflow_agent_k8s_chart_values: %s set by the role from its own variables "
            "(see the role's documentation for which)" % ", ".join(taken)
        )
    return problems


def _own_objects(settings, names):
    """The objects the role applies itself: Namespaces (the chart makes none) and the skeletons
    of its Secrets (the role adds their data under no_log)."""
    name = settings.get(PREFIX + "name")
    labels = dict(settings.get(PREFIX + "labels") or {})
    labels.update(
        {
            "app.kubernetes.io/name": "workflow-agent",
            "app.kubernetes.io/instance": name,
            "app.kubernetes.io/component": "agent",
            # Helm's objects say Helm: this finds exactly the role's own.
            "app.kubernetes.io/managed-by": "selfhosted.workflow_agent",
        }
    )
    secrets = secret_names(name)
    wanted = {
        "token": not settings.get(PREFIX + "existing_secret"),
        "proxy": bool(proxy_secret_data(settings.get(PREFIX + "proxy"))),
    }
    return {
        "namespaces": [
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": ns,
                    "labels": dict(settings.get(PREFIX + "namespace_labels") or {}),
                },
            }
            for ns in names
            if settings.get(PREFIX + "create_namespaces")
        ],
        "secrets": dict(
            (
                kind,
                [
                    {
                        "apiVersion": "v1",
                        "kind": "Secret",
                        "type": "Opaque",
                        "metadata": {"name": secrets[kind], "namespace": ns, "labels": labels},
                    }
                    for ns in names
                    if wanted[kind]
                ],
            )
            for kind in ("token", "proxy")
        ),
    }


def chart_values(settings, plan, digests=None):
    """Each namespace's chart values, and the objects the role applies itself.

    ``settings``: the role's variables by name (the token left out); ``plan``: the
    ``namespace_plan`` result; ``digests``: namespace -> digest of its token (and proxy)
    Secret data ("" where unknown, as in ``render`` with an existing Secret).

    Returns ``{"values": {namespace: values}, "namespaces": [Namespace, ...], "secrets":
    {"token": [Secret without data, ...], "proxy": [...]}, "problems": [message, ...]}``.
    """
    common = _common(settings)
    problems = _problems(settings, common)
    extra = settings.get(PREFIX + "chart_values") or {}
    out = {}
    if not problems:
        autoscaled = common["autoscaling"]["mode"] != "none"
        for ns in plan.get("names") or []:
            values = _merge(extra, common)
            values["existingSecretChecksum"] = (digests or {}).get(ns) or ""
            # An autoscaler owns the replicas: the chart leaves them out of the Deployment.
            values["replicas"] = int(plan["replicas"].get(ns, 0))
            if autoscaled:
                values["autoscaling"]["minReplicas"] = int(plan["min_replicas"].get(ns, 0))
            out[ns] = values
    result = {"values": out, "problems": problems}
    result.update(_own_objects(settings, list(out)))
    return result
