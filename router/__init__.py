"""The cuzk router: one ``cuzk.v1.ProvingEngine`` address for a fleet of machines.

Curio sends each SNARK to the router (its ``[Cuzk] Address``); the router
sends it to one machine, fails over within the caller's deadline, and keeps
a witness of every machine on its own clock (docs/decisions/router-and-market.md,
"The router"). Modules: `config` (settings and why), `jobs` (idempotency, held
bytes), `witness` (counts and health rules), `members` (machines and their
clients), `dispatch` (who gets a job), `engine` (`Router`), `status`
(fleet-wide GetStatus, metrics), `service` (the servicer), `server`
(`serve`), `membership` (the members file), ``python -m router``.
"""
