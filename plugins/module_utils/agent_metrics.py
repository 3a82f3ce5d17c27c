# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read an agent's /metrics (Prometheus text format, minimal) into a few plain facts.

Metric names: docs/agent-interfaces.md. Only what agent_info reports is picked out.
"""

from __future__ import absolute_import, division, print_function

import re

__metaclass__ = type

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?[ \t]+(\S+)(?:[ \t]+-?[0-9]+)?$")
_LABEL = re.compile(r'[ \t]*([a-zA-Z_][a-zA-Z0-9_]*)[ \t]*=[ \t]*"((?:[^"\\]|\\.)*)"[ \t]*(?:,|$)')
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


def _unescape(value):
    return re.sub(r"\\[\\\"n]", lambda m: _ESCAPES[m.group(0)], value)


def _labels(text, lineno):
    labels = {}
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _LABEL.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError("line %d: cannot read the labels {%s}" % (lineno, text))
        labels[m.group(1)] = _unescape(m.group(2))
        pos = m.end()
    return labels


def parse(text):
    """[(name, {label: value}, float)] from Prometheus text; ValueError naming the line."""
    samples = []
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a Prometheus sample: %r" % (lineno, line[:80]))
        try:
            value = float(m.group(3))
        except ValueError:
            raise ValueError("line %d: %r is not a number" % (lineno, m.group(3))) from None
        samples.append((m.group(1), _labels(m.group(2) or "", lineno), value))
    return samples


def _sum(samples, name, label=None):
    """Total of a metric (None when absent), or {label value: total} when label is given."""
    found = [(labels, value) for n, labels, value in samples if n == name]
    if label is None:
        return sum(v for _labels, v in found) if found else None
    out = {}
    for labels, value in found:
        key = labels.get(label, "")
        out[key] = out.get(key, 0) + value
    return out


def _int(value):
    return None if value is None else int(value)


def summarize(samples):
    """The facts agent_info returns, from parsed samples."""
    info = next((labels for n, labels, _v in samples if n == "workflow_agent_info"), {})
    busy = _sum(samples, "workflow_agent_busy_slots", "type")
    jobs = _sum(samples, "workflow_agent_jobs_total", "result")
    last_claim = _sum(samples, "workflow_agent_last_claim_timestamp_seconds")
    draining = _sum(samples, "workflow_agent_draining")
    breaker = _sum(samples, "workflow_agent_circuit_breaker_open")
    return {
        "instance": info.get("instance"),
        "version": info.get("version"),
        "deploy_target": info.get("deploy_target"),
        "slots": _int(_sum(samples, "workflow_agent_slots")),
        "busy_slots": int(sum(busy.values())),
        "busy_slots_by_type": dict((k, int(v)) for k, v in busy.items()),
        "jobs": dict((k, int(v)) for k, v in jobs.items()),
        "jobs_total": int(sum(jobs.values())),
        "draining": None if draining is None else draining > 0,
        "circuit_breaker_open": None if breaker is None else breaker > 0,
        # 0 means "never": the gauge starts at 0 before the first claim.
        "last_claim": last_claim or None,
    }
