"""Everything between a run and a language model: building the request and
talking to the provider.

- The request: the system prompt and the run's context (`prompt`), its cache
  breakpoints (`prompt_cache`), the history of earlier runs (`history`), its
  folding into a summary (`compaction`), fitting the context window
  (`request_fit`, `token_count`), the tools offered (`tools`), what a run's
  messages hold (`transcript`), the verdict read from the answer
  (`verdict`), and the models with their prices and limits (`model_table`).
- The providers, behind one small interface (`LlmProvider`, in `base`):
  `anthropic_provider`, the offline `autopilot`, `factory`, and the pure
  timing and classification rules (`timing`, `classify`, `request`).

Import from the submodules: this package imports nothing itself, so a
workflow that needs only pure rules (`timing`, `verdict`) does not load the
vendor SDK.
"""
