"""The capacity model shared by the simulator and the fleet: CPU, GPU and RAM bounds."""

from __future__ import annotations

import math

from fleet_agent.fleet.capacity import (
    SYNTHESIS_CORE_SECONDS,
    concurrent_proofs,
    cpu_bound_proofs_per_hour,
    engine,
    min_cuda,
    proofs_per_hour,
    record_proofs_per_hour,
    seconds_per_proof,
)

GIB = 1024.0


def test_synthesis_costs_about_55_cpu_seconds_per_partition() -> None:
    assert SYNTHESIS_CORE_SECONDS == 550
    assert cpu_bound_proofs_per_hour(11) == 72.0
    assert cpu_bound_proofs_per_hour(0) == 0.0


def test_an_8_gpu_host_with_few_cores_does_not_reach_8x() -> None:
    one = proofs_per_hour("RTX 3090", 1, 64 * GIB, cpu_cores=16)
    assert 23 <= one <= 28  # one GPU is GPU-bound on 16 cores
    ram = 8 * 64 * GIB
    few = proofs_per_hour("RTX 3090", 8, ram, cpu_cores=16)
    assert few == cpu_bound_proofs_per_hour(16) < 8 * one / 1.8
    many = proofs_per_hour("RTX 3090", 8, ram, cpu_cores=128)
    assert (
        many == proofs_per_hour("RTX 3090", 8, ram) == 8 * proofs_per_hour("RTX 3090", 1, 64 * GIB)
    )
    # Unknown cores: no CPU bound (what a caller that cannot tell gets).
    assert proofs_per_hour("RTX 3090", 8, ram, cpu_cores=None) == many


def test_cards_the_prover_cannot_run_on_prove_nothing() -> None:
    assert proofs_per_hour("RTX 3070", 1, 128 * GIB, 32) == 0  # 8 GB of GPU memory
    assert proofs_per_hour("GTX 1080 Ti", 1, 128 * GIB, 32) == 0  # Pascal: too old
    assert proofs_per_hour("RTX 3090", 1, 32 * GIB, 32) == 0  # the SRS does not fit in RAM
    assert math.isinf(seconds_per_proof("RTX 3070", 1, 128 * GIB))
    assert concurrent_proofs("RTX 3070", 1, 128 * GIB) == 0 and engine("RTX 3070", 1, 0) == ""


def test_more_ram_switches_to_cuzk_and_proves_more() -> None:
    assert engine("RTX 4090", 1, 100 * GIB) == "supraseal"
    assert engine("RTX 4090", 1, 512 * GIB) == "cuzk"
    assert proofs_per_hour("RTX 4090", 1, 512 * GIB, 64) > 2 * proofs_per_hour(
        "RTX 4090", 1, 100 * GIB, 64
    )
    assert concurrent_proofs("RTX 3090", 4, 4 * 64 * GIB) == 4
    assert concurrent_proofs("RTX 3090", 4, 130 * GIB) == 2  # two SRS copies fit


def test_a_row_is_read_with_its_effective_cores() -> None:
    offer = {
        "gpu_name": "RTX 3090",
        "num_gpus": 8,
        "cpu_ram": 8 * 64 * GIB,
        "cpu_cores": 128,
        "cpu_cores_effective": 16.0,
    }
    assert record_proofs_per_hour(offer) == cpu_bound_proofs_per_hour(16)
    del offer["cpu_cores_effective"]
    assert record_proofs_per_hour(offer) == proofs_per_hour("RTX 3090", 8, 8 * 64 * GIB, 128)
    assert record_proofs_per_hour({}) == 0


def test_a_slice_of_a_big_host_proves_at_its_share_of_the_ram() -> None:
    """One GPU of an 8-GPU 512 GiB host gets 64 GiB (docs.vast.ai, "Docker
    Execution Environment", RAM): it proves like a 64 GiB machine, not like
    a 512 GiB one, which would run cuzk at its fastest tier."""
    slice_of_big = {"gpu_name": "RTX 4090", "num_gpus": 1, "cpu_ram": 512 * GIB, "gpu_frac": 0.125}
    small = {"gpu_name": "RTX 4090", "num_gpus": 1, "cpu_ram": 64 * GIB}
    whole = {**slice_of_big, "gpu_frac": 1.0}
    assert record_proofs_per_hour(slice_of_big) == record_proofs_per_hour(small)
    assert record_proofs_per_hour(whole) > 2 * record_proofs_per_hour(slice_of_big)
    # A share that makes no sense is no share: the row is read as a whole host.
    for odd in (0, -0.5, 1.5, float("nan"), "half", None):
        assert record_proofs_per_hour({**slice_of_big, "gpu_frac": odd}) == (
            record_proofs_per_hour(whole)
        )


def test_the_oldest_cuda_each_architecture_runs_on() -> None:
    assert min_cuda("RTX 5090") == 12.8  # Blackwell, sm_120
    assert min_cuda("RTX 4090") == 11.8 and min_cuda("H100 SXM") == 11.8
    assert min_cuda("A100 SXM4") == 11.0 and min_cuda("RTX 3090") == 11.1
    assert min_cuda("Tesla V100") == 0.0  # older than any figure: the image's own minimum
    assert min_cuda("B200", compute_cap=1000) == 12.8  # a card the table does not list
    assert min_cuda("Some New Card") == 0.0
