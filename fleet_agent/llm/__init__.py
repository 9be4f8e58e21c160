"""LLM providers behind one small interface (`LlmProvider`, in `base`), and their errors.

Import from the submodules (`fleet_agent.llm.base`, `.anthropic_provider`,
`.autopilot`, `.timing`): this package imports nothing itself, so a workflow
that needs only the pure `timing` rules does not load the vendor SDK.
"""
