"""The cuzk proving engine's gRPC contract (``cuzk.v1.ProvingEngine``).

``proving.proto`` restates the service Curio defines (its file is cited
there); ``proving_pb2`` is generated from it by ``make proto`` and
committed, so nothing is generated at install. `service` binds the methods
to grpc without generated grpc code: typed stubs and one way to serve.
"""
