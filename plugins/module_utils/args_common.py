# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument spec pieces shared by the modules (documented by the doc fragments of the same names).

Build a module's spec with ``argspec(HTTP_ARG_SPEC, SERVICE_ARG_SPEC, own_options)``.
"""

from __future__ import absolute_import, division, print_function

import copy

from ansible.module_utils.basic import env_fallback

__metaclass__ = type

# Any HTTP call a module makes (doc fragment selfhosted.workflow_agent.http_options).
HTTP_ARG_SPEC = {
    "timeout": {"type": "float", "default": 10},
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
}

# The service's REST API (doc fragment selfhosted.workflow_agent.service).
SERVICE_ARG_SPEC = {
    "service_url": {
        "type": "str",
        "default": "https://api.pulumi.com",
        "fallback": (env_fallback, ["PULUMI_BACKEND_URL"]),
    },
    "access_token": {
        "type": "str",
        "required": True,
        "no_log": True,
        "fallback": (env_fallback, ["PULUMI_ACCESS_TOKEN"]),
    },
    "organization": {"type": "str", "required": True, "aliases": ["org"]},
}


def argspec(*parts):
    """One argument spec from several (later parts win), deep-copied so modules never share."""
    spec = {}
    for part in parts:
        spec.update(copy.deepcopy(part))
    return spec
