"""The parts of `workflow_agent.config` (import from there): errors, fields, model, validation,
loading and rendering, one module each."""
