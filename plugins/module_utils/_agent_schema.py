# -*- coding: utf-8 -*-
# Copyright: selfhosted.workflow_agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private to this collection (the ``_`` prefix): the one place that loads the agent's config
schema, and so the only module that edits ``sys.path``.

The schema lives in the agent source vendored in this collection (<collection>/agent/src), the
one source of truth; the action plugins (agent_config, upstream_agent_info) validate with it on
the controller. pydantic and PyYAML are imported by ``load()`` only, so the collection loads
(and sanity's import test passes) on a controller without them.
"""

from __future__ import absolute_import, division, print_function

import os
import sys

__metaclass__ = type

# plugins/module_utils/_agent_schema.py -> the collection root (a checkout or an installed copy).
COLLECTION_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
AGENT_SRC = os.path.join(COLLECTION_ROOT, "agent", "src")
REQUIREMENTS = os.path.join(COLLECTION_ROOT, "requirements.txt")
MASK = "***"


class SchemaUnavailable(Exception):
    """The schema cannot be imported; the message says why and what to do."""


def load():
    """Import the vendored agent's config module (and yaml): ``(schema, yaml)``."""
    if not os.path.isfile(os.path.join(AGENT_SRC, "workflow_agent", "config.py")):
        raise SchemaUnavailable(
            "the agent's config schema is missing from the collection "
            "(expected %s/workflow_agent/config.py); reinstall the collection" % AGENT_SRC
        )
    try:
        import pydantic  # noqa: F401 - only to name it when missing
        import yaml
    except ImportError as exc:
        raise SchemaUnavailable(
            "the controller's Python (%s) lacks %s: pip install -r %s"
            % (sys.executable, getattr(exc, "name", None) or exc, REQUIREMENTS)
        ) from None
    # Always the vendored copy: drop a workflow_agent imported from anywhere else.
    for name in list(sys.modules):
        if name == "workflow_agent" or name.startswith("workflow_agent."):
            origin = getattr(sys.modules[name], "__file__", None) or ""
            if not os.path.abspath(origin).startswith(AGENT_SRC + os.sep):
                del sys.modules[name]
    if AGENT_SRC not in sys.path:
        sys.path.insert(0, AGENT_SRC)
    try:
        from workflow_agent import config as schema
    except ImportError as exc:
        raise SchemaUnavailable(
            "cannot import the agent's config schema from %s: %s (pip install -r %s)"
            % (AGENT_SRC, exc, REQUIREMENTS)
        ) from None
    return schema, yaml


def plain(value):
    """Plain Python data from whatever the template engine passed (tagged str/dict subclasses)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, dict):
        return dict((plain(k), plain(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value
