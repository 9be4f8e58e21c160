"""What the LLM path costs in tokens and dollars: the prompt cache's share
(`prompt_cache`) and a long session's growth (`context_growth`), on the fake
Messages API."""
