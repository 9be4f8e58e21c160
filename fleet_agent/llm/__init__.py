"""Everything between a run and a language model: building the request and
talking to the provider.

- The request: the system prompt and the run's context (`prompt`), its cache
  breakpoints (`prompt_cache`), the history of earlier runs (`history`), its
  folding into a summary (`compaction`), fitting the context window
  (`request_fit`, `token_count`), the tools offered (`tools`), what a run's
  messages hold (`transcript`), the verdict read from the answer
  (`verdict`), and the models with their prices and limits (`model_table`).
- The providers, behind one small interface (`LlmProvider`, in `base`):
  `anthropic_provider` and the pure timing and classification rules
  (`timing`, `classify`, `request`). The offline stand-in
  (fleet_agent/autopilot/) builds on this package, and the worker picks one
  of the two with runtime/llm_provider.py: nothing here imports the
  autopilot or the settings (fleet_agent/config/), and the policy numbers the
  prompt states come from fleet_agent/policy/.

Import from the submodules: this package imports nothing itself, so a
workflow that needs only pure rules (`timing`, `verdict`) does not load the
vendor SDK.
"""
