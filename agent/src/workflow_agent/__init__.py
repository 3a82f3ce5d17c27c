"""Workflow agent: a drop-in re-implementation of Pulumi's customer-managed workflow agent."""

__version__ = "0.2.0"
