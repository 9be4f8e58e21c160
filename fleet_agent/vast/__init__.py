"""vast.ai REST client: search offers, rent, list, show and destroy instances.

See `VastClient` for the API, `fleet_agent.vast.errors` for the failure model
(and the `ambiguous` flag that tells when a failed create may have rented a
machine anyway).
"""

from .client import (
    API_KEY_ENV,
    API_URL_ENV,
    DEFAULT_BASE_URL,
    LIST_PAGE_SIZE,
    OfferType,
    VastClient,
)
from .errors import (
    VastAuthError,
    VastBadRequest,
    VastConnectionError,
    VastError,
    VastNotFound,
    VastProtocolError,
    VastRateLimited,
    VastServerError,
    VastTimeout,
)
from .models import BOOTING_STATUSES, TERMINAL_STATUSES, Instance, Offer
from .query import FILTER_OPS, Filters, OrderSpec, normalize_order, validate_filters

__all__ = [
    "API_KEY_ENV",
    "API_URL_ENV",
    "BOOTING_STATUSES",
    "DEFAULT_BASE_URL",
    "FILTER_OPS",
    "LIST_PAGE_SIZE",
    "TERMINAL_STATUSES",
    "Filters",
    "Instance",
    "Offer",
    "OfferType",
    "OrderSpec",
    "VastAuthError",
    "VastBadRequest",
    "VastClient",
    "VastConnectionError",
    "VastError",
    "VastNotFound",
    "VastProtocolError",
    "VastRateLimited",
    "VastServerError",
    "VastTimeout",
    "normalize_order",
    "validate_filters",
]
