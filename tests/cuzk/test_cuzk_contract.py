"""The cuzk.v1 contract fleet-agent serves is Curio's, number for number.

Curio's client (lib/cuzk/client.go) encodes by field number and method path,
so a renumbered field or a renamed method breaks it silently. The table is
copied from curio extern/cuzk/cuzk-proto/proto/cuzk/v1/proving.proto.
"""

from __future__ import annotations

import grpc
import grpc.aio
import pytest

from fleet_agent.cuzk.service import SERVICE, ProvingEngineStub, add_servicer, pb

CURIO_FIELDS = {
    "SubmitProofRequest": {
        "request_id": 1, "proof_kind": 2, "sector_size": 3, "registered_proof": 4,
        "priority": 5, "vanilla_proof": 10, "vanilla_proofs": 11, "sector_number": 20,
        "miner_id": 21, "randomness": 22, "partition_index": 23, "comm_r_old": 30,
        "comm_r_new": 31, "comm_d_new": 32,
    },
    "SubmitProofResponse": {"job_id": 1, "queue_position": 2, "assigned_gpu": 3},
    "AwaitProofRequest": {"job_id": 1, "timeout_ms": 2},
    "AwaitProofResponse": {
        "job_id": 1, "status": 2, "proof": 3, "error_message": 4, "queue_wait_ms": 10,
        "srs_load_ms": 11, "synthesis_ms": 12, "gpu_compute_ms": 13, "total_ms": 14,
    },
    "ProveRequest": {"submit": 1},
    "ProveResponse": {"result": 1},
    "CancelProofRequest": {"job_id": 1},
    "CancelProofResponse": {"was_running": 1},
    "GetStatusRequest": {},
    "GetStatusResponse": {
        "gpus": 1, "loaded_srs": 2, "queues": 3, "total_proofs_completed": 4,
        "total_proofs_failed": 5, "uptime_seconds": 6, "pinned_memory_bytes": 7,
        "pinned_memory_limit_bytes": 8,
    },
    "GPUStatus": {
        "ordinal": 1, "name": 2, "vram_total_bytes": 3, "vram_free_bytes": 4,
        "current_job_id": 5, "current_proof_kind": 6,
    },
    "SRSStatus": {"circuit_id": 1, "tier": 2, "size_bytes": 3, "ref_count": 4},
    "QueueStatus": {"proof_kind": 1, "pending": 2, "in_progress": 3},
    "PreloadSrsRequest": {"circuit_id": 1},
    "PreloadSrsResponse": {"already_loaded": 1, "load_time_ms": 2},
    "EvictSrsRequest": {"circuit_id": 1},
    "EvictSrsResponse": {"was_loaded": 1, "freed_bytes": 2},
    "GetMetricsRequest": {},
    "GetMetricsResponse": {"prometheus_text": 1},
}  # fmt: skip

CURIO_ENUMS = {
    "ProofKind": {
        "PROOF_KIND_UNSPECIFIED": 0, "POREP_SEAL_COMMIT": 1, "SNAP_DEALS_UPDATE": 2,
        "WINDOW_POST_PARTITION": 3, "WINNING_POST": 4,
    },
    "Priority": {"PRIORITY_UNSPECIFIED": 0, "LOW": 1, "NORMAL": 2, "HIGH": 3, "CRITICAL": 4},
    "AwaitProofResponse.Status": {
        "UNKNOWN": 0, "COMPLETED": 1, "FAILED": 2, "CANCELLED": 3, "TIMEOUT": 4,
    },
    "SRSStatus.Tier": {"HOT": 0, "WARM": 1, "COLD": 2},
}  # fmt: skip

CURIO_METHODS = [
    "SubmitProof", "AwaitProof", "Prove", "CancelProof", "GetStatus", "GetMetrics",
    "PreloadSRS", "EvictSRS",
]  # fmt: skip


def test_package_service_and_methods_are_curios() -> None:
    desc = pb.DESCRIPTOR
    assert desc.package == "cuzk.v1"
    service = desc.services_by_name["ProvingEngine"]
    assert service.full_name == SERVICE
    assert [m.name for m in service.methods] == CURIO_METHODS


@pytest.mark.parametrize("message", sorted(CURIO_FIELDS))
def test_field_numbers_are_curios(message: str) -> None:
    fields = pb.DESCRIPTOR.message_types_by_name[message].fields
    assert {f.name: f.number for f in fields} == CURIO_FIELDS[message]


@pytest.mark.parametrize("enum", sorted(CURIO_ENUMS))
def test_enum_values_are_curios(enum: str) -> None:
    outer, _, inner = enum.partition(".")
    if inner:
        desc = pb.DESCRIPTOR.message_types_by_name[outer].enum_types_by_name[inner]
    else:
        desc = pb.DESCRIPTOR.enum_types_by_name[outer]
    assert {v.name: v.number for v in desc.values} == CURIO_ENUMS[enum]


class _Partial:
    async def GetStatus(
        self, request: pb.GetStatusRequest, context: grpc.aio.ServicerContext[object, object]
    ) -> pb.GetStatusResponse:
        return pb.GetStatusResponse(queues=[pb.QueueStatus(proof_kind="PoRep", pending=3)])


async def test_binding_serves_and_missing_methods_are_unimplemented() -> None:
    server = grpc.aio.server()
    add_servicer(server, _Partial())  # type: ignore[arg-type]
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = ProvingEngineStub(channel)
            status = await stub.GetStatus(pb.GetStatusRequest(), timeout=5)
            assert status.queues[0].pending == 3
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Prove(pb.ProveRequest(), timeout=5)
            assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        await server.stop(0)
