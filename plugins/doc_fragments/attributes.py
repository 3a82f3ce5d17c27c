# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    # The attribute this collection declares beyond ansible.builtin.action_common_attributes.
    DOCUMENTATION = r"""
attributes:
  idempotent:
    description:
      - When run twice with the same arguments on an unchanged target, the second run reports
        no change and changes nothing.
"""
