#!/usr/bin/env python3
"""Generate the workflow-agent chart's derived files from their one source each:

- charts/workflow-agent/values.schema.json: the chart's own values (described here, once) and,
  under `config`, every agent key with its type read from the agent's config model
  (agent/src/workflow_agent/_config, pydantic): never a second copy of the agent's keys.
- charts/workflow-agent/files/prometheus-rules.yml: extensions/prometheus/rules.yml, which
  the PrometheusRule template reads with .Files (it sees only the chart's own files).

    scripts/chart-schema.py           write both
    scripts/chart-schema.py --check   exit 1 naming each file that differs from its source

Helm 3 validates values with JSON Schema draft-07 before it renders anything, and prints every
violation as `at '/<path>': <reason>`. Its reasons for a pattern or a minimum are terse, so a
value with a human description is wrapped as anyOf [the real check, a `const` holding the
description that `not: {}` keeps from ever matching]: a bad value then prints
`at '/config/polling_interval': value must be 'a Go duration such as 30s, 1m or 1h30m'`
under the real check's reason.
"""

from __future__ import annotations

import argparse
import difflib
import inspect
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "workflow-agent"
SCHEMA = CHART / "values.schema.json"
RULES_SOURCE = ROOT / "extensions" / "prometheus" / "rules.yml"
RULES_COPY = CHART / "files" / "prometheus-rules.yml"
sys.path.insert(0, str(ROOT / "agent" / "src"))

from workflow_agent._config import fields, model  # noqa: E402 - after the path

# Go's time.ParseDuration syntax, without the minus sign (the agent rejects negative values).
GO_DURATION = r"^\+?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$|^[+-]?0$"
ZERO_DURATION = r"^\+?((0+(\.0*)?|\.0+)(ns|us|µs|μs|ms|s|m|h))+$|^[+-]?0$"
ENV_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
# Prometheus's duration (prometheus-operator's CRDs check it with this pattern).
PROMETHEUS_DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
# The booleans the agent's parse_bool might take; the schema lists those it does take.
BOOL_CANDIDATES = [
    s
    for word in ("true", "false", "t", "f", "yes", "no", "y", "n", "on", "off", "1", "0")
    for s in sorted({word, word.upper(), word.title()})
]

# Agent keys the chart sets from its own values (and the value to use instead).
CHART_SET = {
    "token": "token or existingSecret",
    "deploy_target": None,  # always kubernetes
    "slots": "slots",
    "drain_timeout": "drainTimeout",
    "http_server_port": "port",
    "ca_bundle": "caBundle",
}
# The agent container's variables the chart sets (templates/_helpers.tpl, wfa.env).
CHART_ENV = {
    "PULUMI_AGENT_CONFIG": None,
    "PULUMI_AGENT_TOKEN": "token or existingSecret",
    "WORKFLOW_AGENT_INSTANCE": None,
    "WORKFLOW_AGENT_WORKER_POD_PATCH": "worker.pod",
    "PULUMI_AGENT_SERVICE_ACCOUNT_NAME": None,
    "PULUMI_AGENT_NUM_CPUS": "worker.cpu",
    "PULUMI_AGENT_MEM_QUANTITY": "worker.memory",
    "WORKFLOW_AGENT_JOB_IMAGE_PULL_POLICY": "worker.imagePullPolicy",
    "HTTP_PROXY": "proxy.http",
    "http_proxy": "proxy.http",
    "HTTPS_PROXY": "proxy.https",
    "https_proxy": "proxy.https",
    "NO_PROXY": "proxy.noProxy",
    "no_proxy": "proxy.noProxy",
}


class Unknown(Exception):
    """A field type this generator cannot translate: teach it (never guess)."""


def described(check: dict, what: str) -> dict:
    """`check`, whose failure also prints `value must be '<what>'` (see the module docstring)."""
    return {"anyOf": [check, {"const": what, "not": {}}]}


def set_by_chart(key: str, instead: str | None) -> dict:
    what = f"unset: the chart sets {key} itself" + (
        f" (use the value {instead})" if instead else ""
    )
    return {"const": what, "not": {}}


def accepts(check, value) -> bool:
    try:
        check(value)
    except Exception:  # noqa: BLE001 - any refusal counts
        return False
    return True


def duration(positive: bool, optional: bool, bare_seconds: bool) -> dict:
    check: dict = {"type": "string", "pattern": GO_DURATION}
    what = "a Go duration such as 30s, 1m or 1h30m"
    if positive:
        check["not"] = {"pattern": ZERO_DURATION}
        what = "a Go duration longer than 0s, such as 30s, 1m or 1h30m"
    alternatives = [check]
    if optional:
        alternatives.append({"const": ""})
        what += ', or "" (not set)'
    if bare_seconds:
        alternatives.append({"type": "integer", "minimum": 1})
        what += ", or whole seconds"
    return {"anyOf": [*alternatives, {"const": what, "not": {}}]}


def field_schema(name: str, info) -> dict:
    """The JSON schema of one pydantic field, from the validator its type declares."""
    validators = [m.func for m in info.metadata if hasattr(m, "func")]
    if len(validators) != 1:
        raise Unknown(f"{name}: expected one BeforeValidator, found {len(validators)}")
    func = validators[0]
    free = inspect.getclosurevars(func).nonlocals
    qual = func.__qualname__
    if func is fields.parse_bool:
        values = [True, False] + [s for s in BOOL_CANDIDATES if accepts(func, s)]
        return {"enum": values}
    if func is fields.parse_str:
        return {"type": "string"}
    if func is fields._id:  # noqa: SLF001 - the type's own validator is what identifies it
        return {"type": ["string", "integer"]}
    if func is fields._url:  # noqa: SLF001
        return described(
            {"type": "string", "pattern": r"^\s*https?://[^/\s?#]+(/\S*)?\s*$"},
            "an http(s) URL such as https://api.pulumi.com",
        )
    if func is fields._env_names:  # noqa: SLF001
        return {"type": "array", "items": {"type": "string", "pattern": ENV_NAME}}
    if func is fields._ids:  # noqa: SLF001
        return {"type": "array", "items": {"type": "string", "minLength": 1}}
    if qual == "_duration.<locals>.check":
        return duration(free["positive"], free["optional"], free["bare_seconds"])
    if qual == "Count.<locals>.check":
        return {"type": "integer", "minimum": free["low"], "maximum": free["high"]}
    if qual == "OneOf.<locals>.<lambda>":
        return {"enum": list(free["choices"])}
    if func is model._workflow_types:  # noqa: SLF001
        return {
            "type": "array",
            "items": {"enum": list(model.WORKFLOW_TYPES)},
            "minItems": 1,
        }
    if func is model._ecs:  # noqa: SLF001
        return model_schema(model.EcsConfig)
    raise Unknown(f"{name}: no JSON schema for the validator {func.__module__}.{qual}")


def model_schema(cls, skip: dict | None = None) -> dict:
    skip = skip or {}
    properties = {}
    for name, info in cls.model_fields.items():
        if name in skip:
            properties[name] = set_by_chart(f"config.{name}", skip[name])
        else:
            properties[name] = field_schema(f"{cls.__name__}.{name}", info)
    return {"type": "object", "additionalProperties": False, "properties": properties}


def agent_config_schema() -> dict:
    missing = sorted(set(CHART_SET) - set(model.ALL_KEYS))
    if missing:
        raise Unknown(f"the chart sets {', '.join(missing)}, which the agent no longer has")
    schema = model_schema(model.AgentConfig, skip=CHART_SET)
    for key in sorted(model.IGNORED_KEYS):  # accepted and ignored by the agent (upstream's docs)
        schema["properties"].setdefault(key, {})
    return schema


def agent_field(name: str) -> dict:
    return field_schema(name, model.AgentConfig.model_fields[name])


# --- the chart's own values (each documented in values.yaml) ------------------------------

STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}
OBJECT = {"type": "object"}
OBJECTS = {"type": "array", "items": {"type": "object"}}
NAMES = {"type": "array", "items": {"type": "string", "pattern": DNS_SUBDOMAIN}}
SCALAR = {"type": ["string", "number", "boolean"]}


def closed(properties: dict, **extra) -> dict:
    return {"type": "object", "additionalProperties": False, "properties": properties, **extra}


def values_schema() -> dict:
    env_properties = {n: set_by_chart(f"env.{n}", v) for n, v in CHART_ENV.items()}
    schema = closed(
        {
            # Parent charts pass `global` to their subcharts.
            "global": OBJECT,
            "image": closed(
                {
                    "repository": described(
                        {"type": "string", "minLength": 1},
                        "required: the repository of the agent image, in a registry the "
                        "cluster can pull from, such as registry.example.com/workflow-agent",
                    ),
                    "tag": {"type": "string"},
                    "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                    "pullSecrets": NAMES,
                }
            ),
            "replicas": {"type": "integer", "minimum": 0},
            "slots": agent_field("slots"),
            # Never shown in an error: no pattern (a message would echo the value).
            "token": {"type": "string"},
            "existingSecret": described(
                {"type": "string", "pattern": DNS_SUBDOMAIN + "|^$"}, "a Secret's name"
            ),
            "tokenSecretKey": {"type": "string", "pattern": r"^[-._a-zA-Z0-9]+$"},
            "existingSecretChecksum": {"type": "string"},
            "serviceUrl": {"anyOf": [{"const": ""}, agent_field("service_url")]},
            "drainTimeout": agent_field("drain_timeout"),
            "terminationGraceMargin": {"type": "integer", "minimum": 0},
            "config": agent_config_schema(),
            "port": {"type": "integer", "minimum": 1, "maximum": 65535},
            "env": {
                "type": "object",
                "properties": env_properties,
                "additionalProperties": SCALAR,
                "propertyNames": {"pattern": ENV_NAME},
            },
            "caBundle": {"type": "string"},
            "proxy": closed(
                {
                    "http": {"type": "string"},
                    "https": {"type": "string"},
                    "noProxy": {"type": "string"},
                    "existingSecret": {"type": "string", "pattern": DNS_SUBDOMAIN + "|^$"},
                }
            ),
            "podIds": {"type": "boolean"},
            "labels": STRINGS,
            "podAnnotations": STRINGS,
            "resources": OBJECT,
            "nodeSelector": STRINGS,
            "tolerations": OBJECTS,
            "affinity": OBJECT,
            "topologySpreadConstraints": OBJECTS,
            "pdb": closed({"maxUnavailable": {"type": ["integer", "string", "null"]}}),
            "service": closed(
                {"annotations": STRINGS, "prometheusAnnotations": {"type": "boolean"}}
            ),
            "prometheusPodAnnotations": {"type": "boolean"},
            "serviceMonitor": closed(
                {
                    "enabled": {"type": "boolean"},
                    "interval": {"type": "string", "pattern": PROMETHEUS_DURATION},
                }
            ),
            "prometheusRule": closed({"enabled": {"type": "boolean"}}),
            "autoscaling": closed(
                {
                    "mode": {"enum": ["none", "hpa", "keda"]},
                    "minReplicas": {"type": ["integer", "null"], "minimum": 0},
                    "maxReplicas": {"type": ["integer", "null"], "minimum": 1},
                    "hpaMetrics": OBJECTS,
                    "kedaTriggers": OBJECTS,
                }
            ),
            "networkPolicy": closed({"enabled": {"type": "boolean"}, "from": OBJECTS}),
            "worker": closed(
                {
                    "serviceAccountAnnotations": STRINGS,
                    "automountToken": {"type": "boolean"},
                    "imagePullSecrets": NAMES,
                    "pod": OBJECT,
                    "cpu": {"type": ["string", "number"]},
                    "memory": {"type": ["string", "number"]},
                    "imagePullPolicy": {"enum": ["", "Always", "IfNotPresent", "Never"]},
                }
            ),
            "tests": closed({"image": {"type": "string"}}),
        }
    )
    schema["allOf"] = [
        # Exactly one of the two: helm names both keys when neither or both are set.
        {
            "oneOf": [
                {"properties": {"token": {"minLength": 1}, "existingSecret": {"maxLength": 0}}},
                {"properties": {"token": {"maxLength": 0}, "existingSecret": {"minLength": 1}}},
            ]
        },
        {
            "if": {
                "properties": {"autoscaling": {"properties": {"mode": {"enum": ["hpa", "keda"]}}}}
            },
            "then": {
                "properties": {
                    "autoscaling": {
                        "properties": {
                            "maxReplicas": described(
                                {"type": "integer"},
                                "a number: required with autoscaling.mode hpa or keda",
                            )
                        }
                    }
                }
            },
        },
        {
            "if": {"properties": {"autoscaling": {"properties": {"mode": {"const": "keda"}}}}},
            "then": {
                "properties": {
                    "autoscaling": {
                        "properties": {
                            "kedaTriggers": described(
                                {"minItems": 1},
                                "at least one trigger: required with autoscaling.mode keda",
                            )
                        }
                    }
                }
            },
        },
    ]
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "$comment": "Generated by scripts/chart-schema.py from the agent's config model "
        "(agent/src/workflow_agent/_config): do not edit.",
        "title": "workflow-agent chart values",
        **schema,
    }


def outputs() -> dict[Path, str]:
    rules = RULES_SOURCE.read_text()
    header = (
        "# Generated by scripts/chart-schema.py from extensions/prometheus/rules.yml: edit that"
        " file.\n"
    )
    return {
        SCHEMA: json.dumps(values_schema(), indent=2, ensure_ascii=False) + "\n",
        RULES_COPY: header + rules,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args()
    try:
        wanted = outputs()
    except Unknown as exc:
        print(f"chart-schema: {exc}: teach scripts/chart-schema.py this type", file=sys.stderr)
        return 2
    drift = []
    for path, text in wanted.items():
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        rel = path.relative_to(ROOT)
        if args.check:
            drift.append(str(rel))
            diff = difflib.unified_diff(
                (current or "").splitlines(True),
                text.splitlines(True),
                f"{rel} (committed)",
                f"{rel} (generated)",
                n=1,
            )
            sys.stderr.writelines(list(diff)[:40])
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"chart-schema: wrote {rel}")
    if drift:
        print(
            f"chart-schema: out of date: {', '.join(drift)} (run scripts/chart-schema.py)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
