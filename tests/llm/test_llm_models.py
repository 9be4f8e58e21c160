"""The model is pinned and known: the price table, its override, and a worker
that refuses an unknown model when it starts (not at its first run)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from fleet_agent.config.settings import Settings
from fleet_agent.llm import anthropic_provider
from fleet_agent.llm.model_table import (
    DEFAULT_MODEL,
    KNOWN_MODELS,
    ModelInfo,
    UnknownModel,
    cost_usd,
    model_table,
)
from fleet_agent.models import TokenUsage
from starter.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
ANTHROPIC = {"FLEET_LLM_PROVIDER": "anthropic", "ANTHROPIC_API_KEY": "sk-ant-test"}


def test_the_default_model_is_pinned_known_and_the_providers() -> None:
    assert DEFAULT_MODEL == "claude-sonnet-5-5" == anthropic_provider.default_model()
    info = KNOWN_MODELS[DEFAULT_MODEL]
    # Sonnet 5.5's migration guide: Sonnet 5's prices, but cache reads at $0.10.
    assert (info.input, info.output, info.cache_read) == (2.0, 10.0, 0.1)
    assert (info.cache_write_5m, info.cache_write_1h) == (2.5, 4.0)
    assert info.min_cacheable_tokens == 512
    assert (info.context_window_tokens, info.max_output_tokens) == (1_000_000, 128_000)
    assert info.adaptive_thinking and info.efforts == ["low", "medium", "high", "xhigh", "max"]
    settings = Settings.from_env(ANTHROPIC)
    assert settings.llm_model == DEFAULT_MODEL and settings.llm_model_info == info


def test_every_known_model_is_priced_with_the_documented_cache_multipliers() -> None:
    for name, info in KNOWN_MODELS.items():
        assert info.cache_write_5m == pytest.approx(info.input * 1.25), name
        assert info.cache_write_1h == pytest.approx(info.input * 2), name
        # Reads are 0.1 × input, but where a model page gives its own price.
        expected = {"claude-sonnet-5-5": 0.1, "claude-opus-5-5": 0.2}.get(name, info.input * 0.1)
        assert info.cache_read == pytest.approx(expected), name
        assert info.min_cacheable_tokens in (512, 1024, 2048, 4096), name


def test_prices_can_be_overridden_and_models_added() -> None:
    new = {
        "input": 1.5,
        "output": 7.5,
        "cache_write_5m": 1.875,
        "cache_write_1h": 3.0,
        "cache_read": 0.15,
        "min_cacheable_tokens": 2048,
    }
    table = model_table(json.dumps({DEFAULT_MODEL: {"cache_read": 0.1}, "claude-next": new}))
    assert table[DEFAULT_MODEL].cache_read == 0.1
    assert table[DEFAULT_MODEL].input == 2.0, "the other fields stay"
    assert table["claude-next"] == ModelInfo(**new)  # type: ignore[arg-type]
    env = {
        **ANTHROPIC,
        "FLEET_LLM_MODEL": "claude-next",
        "FLEET_LLM_PRICES": json.dumps({"claude-next": new}),
    }
    assert Settings.from_env(env).llm_model_info.min_cacheable_tokens == 2048


@pytest.mark.parametrize(
    ("prices", "problem"),
    [
        ("{not json", "FLEET_LLM_PRICES is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"claude-new": {"input": 1}}', "FLEET_LLM_PRICES: claude-new: output: Field required"),
        ('{"claude-sonnet-5-5": {"input": -1}}', "input: Input should be greater than or equal"),
        ('{"claude-sonnet-5-5": {"input": "2"}}', "input: Input should be a valid number"),
        ('{"claude-sonnet-5-5": {"inptu": 2}}', "inptu: Extra inputs are not permitted"),
        ('{"claude-sonnet-5-5": 2}', "must map to an object of prices"),
    ],
)
def test_a_bad_price_table_is_one_clear_line(prices: str, problem: str) -> None:
    with pytest.raises(ValueError, match="FLEET_LLM_PRICES") as err:
        Settings.from_env({**ANTHROPIC, "FLEET_LLM_PRICES": prices})
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_an_unknown_model_is_refused_by_the_settings() -> None:
    with pytest.raises(UnknownModel) as err:
        Settings.from_env({**ANTHROPIC, "FLEET_LLM_MODEL": "claude-sonet-5-5"})
    message = str(err.value)
    assert "FLEET_LLM_MODEL 'claude-sonet-5-5' is not a known model" in message
    assert DEFAULT_MODEL in message and "FLEET_LLM_PRICES" in message
    # The autopilot never calls a model: nothing to check.
    assert Settings.from_env({"FLEET_LLM_MODEL": "claude-sonet-5-5"}).llm_provider == "autopilot"


def test_cost_counts_each_kind_of_token_at_its_price() -> None:
    info = KNOWN_MODELS[DEFAULT_MODEL]
    usage = TokenUsage(
        input_tokens=1_000_000,
        output_tokens=100_000,
        cache_read_input_tokens=2_000_000,
        cache_creation_input_tokens=300_000,
        cache_creation_1h_input_tokens=100_000,
        thinking_tokens=60_000,
    )
    # 2 + 1 (output, thinking included) + 0.2 (read) + 0.2 × 2.5 (5 m writes)
    # + 0.1 × 4 (1 h writes); the thinking figure is a part of the output.
    assert cost_usd(usage, info) == pytest.approx(2 + 1 + 0.2 + 0.5 + 0.4)
    assert cost_usd(usage, info) == cost_usd(usage.model_copy(update={"thinking_tokens": 0}), info)


async def test_python_worker_refuses_an_unknown_model_before_connecting() -> None:
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("FLEET_", "ANTHROPIC_"))},
        **ANTHROPIC,
        "FLEET_LLM_MODEL": "claude-nope",
        # Nothing listens here: the worker must stop before it tries.
        "TEMPORAL_ADDRESS": "127.0.0.1:9",
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "worker.py",
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    assert proc.returncode == 1
    lines = err.decode().strip().splitlines()
    assert lines == [lines[0]], "one line, no traceback"
    assert lines[0].startswith("worker: error: FLEET_LLM_MODEL 'claude-nope' is not a known model")


def test_fleet_agent_worker_refuses_an_unknown_model_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for key, value in {**ANTHROPIC, "FLEET_LLM_MODEL": "claude-nope"}.items():
        monkeypatch.setenv(key, value)
    code = cli_main(["worker", "--address", "127.0.0.1:9"])
    err = capsys.readouterr().err.strip()
    assert code == 1
    assert "FLEET_LLM_MODEL 'claude-nope' is not a known model" in err
    assert len(err.splitlines()) == 1
