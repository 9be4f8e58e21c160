"""vast.ai REST client: search offers, rent, list, show and destroy instances.

See `VastClient` for the API, `fleet_agent.vast.errors` for the failure model
(and the `ambiguous` flag that tells when a failed create may have rented a
machine anyway), `fleet_agent.vast.pacing` for the per-endpoint limits the
client keeps, and `fleet_agent.vast.models` for what an instance's state
fields mean.

Import from the submodules: `client` (VastClient, httpx), `transport` (one
request: auth, pacing, 429s, error mapping), `pacing`, `errors`, `models`
(Offer, Instance: plain pydantic), `query`. The package itself imports
nothing, so the pure models can be used (by workflows, say) without loading
the HTTP client.
"""
