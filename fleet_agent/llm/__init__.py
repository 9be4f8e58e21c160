"""LLM providers behind one small interface (`LlmProvider`), and their errors."""

from .anthropic_provider import AnthropicProvider, classify, default_model, parse_retry_after
from .base import (
    LlmError,
    LlmPermanentError,
    LlmProvider,
    LlmReply,
    LlmRetryableError,
    ProgressCallback,
)
from .temporal_errors import LLM_PERMANENT, LLM_RETRYABLE, to_application_error

__all__ = [
    "LLM_PERMANENT",
    "LLM_RETRYABLE",
    "AnthropicProvider",
    "LlmError",
    "LlmPermanentError",
    "LlmProvider",
    "LlmReply",
    "LlmRetryableError",
    "ProgressCallback",
    "classify",
    "default_model",
    "parse_retry_after",
    "to_application_error",
]
