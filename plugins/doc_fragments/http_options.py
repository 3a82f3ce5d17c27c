# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # plugins/module_utils/args_common.py HTTP_ARG_SPEC
    DOCUMENTATION = r"""
options:
  timeout:
    description: Seconds to wait for each HTTP response.
    type: float
    default: 10
  validate_certs:
    description:
      - Verify the server's TLS certificate. Turn off only for a test service with a
        self-signed certificate; prefer O(ca_path).
    type: bool
    default: true
  ca_path:
    description: A PEM file of CA certificates to verify the server's certificate with.
    type: path
"""
