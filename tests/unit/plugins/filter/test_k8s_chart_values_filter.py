"""The k8s_chart_values filter: registered under its name."""

from __future__ import annotations

from ansible_collections.selfhosted.workflow_agent.plugins.filter.k8s_chart_values import (
    FilterModule,
)
from ansible_collections.selfhosted.workflow_agent.plugins.module_utils.k8s_chart_values import (
    chart_values,
)


def test_registered_under_its_name():
    assert FilterModule().filters()["k8s_chart_values"] is chart_values
