# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # plugins/module_utils/args_common.py SERVICE_ARG_SPEC
    DOCUMENTATION = r"""
options:
  service_url:
    description:
      - Base URL of the service's REST API.
      - Defaults to the environment variable E(PULUMI_BACKEND_URL) when that is set.
    type: str
    default: https://api.pulumi.com
  access_token:
    description:
      - An access token of a user or team that administers the organization's agent pools
        (not a pool token).
      - Defaults to the environment variable E(PULUMI_ACCESS_TOKEN) when that is set.
      - Never logged or returned.
    type: str
    required: true
  organization:
    description: The organization that owns the pool.
    type: str
    required: true
    aliases: [org]
"""
