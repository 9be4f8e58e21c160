"""Pick the LLM provider from the settings (FLEET_LLM_PROVIDER).

Here, above fleet_agent/, because the choice joins what sits apart below
it: the settings (fleet_agent/config/), the real model's client
(fleet_agent/llm/) and the offline stand-in that answers in its place
(fleet_agent/autopilot/, which builds on llm/). fleet_agent/llm/ imports
neither of the others (tests/layers/test_layers.py).
"""

from __future__ import annotations

from fleet_agent.autopilot.provider import AutopilotProvider
from fleet_agent.config.settings import Settings
from fleet_agent.llm.base import LlmProvider

__all__ = ["provider_from_settings"]


def provider_from_settings(settings: Settings) -> LlmProvider:
    """`anthropic` uses the real API (ANTHROPIC_BASE_URL honoured by the SDK);
    `autopilot` is the offline policy."""
    if settings.llm_provider == "anthropic":
        # Imported here: the SDK takes 1.2 s of CPU to import, which a worker
        # on the autopilot, or one that stops on a bad setting, never needs.
        from fleet_agent.llm.anthropic_provider import AnthropicProvider

        key = settings.anthropic_api_key
        return AnthropicProvider(
            api_key=key.get_secret_value() if key else None,
            model=settings.llm_model,
            info=settings.llm_model_info,
        )
    return AutopilotProvider()
