# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading one host's variables (a ``hostvars[name]`` mapping) in the collection's filters."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


def host_var(hv, key, default=None):
    """``hv[key]``, or ``default`` when the variable is unset or null."""
    try:
        value = hv[key]
    except KeyError:
        return default
    return default if value is None else value
