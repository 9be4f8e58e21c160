"""The pure rules of notifications: which events are admitted (notify_events,
the quiet window), the idempotency key, what each says (and the approval's
link and CLI commands), how a URL is shown (scheme and host only), and how a
run's texts are read for refusals and rejected keys: the texts our own code
writes, so a change of their wording fails here."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta

import pytest

from activities.fleet_results import vast_failure
from fleet_agent.fleet.budget import budget_refusal
from fleet_agent.models import (
    DEFAULT_NOTIFY_EVENTS,
    AgentConfig,
    NotifyEvent,
    NotifyFailure,
    ToolResult,
)
from fleet_agent.notify.render import render
from fleet_agent.notify.rules import admit, idempotency_key, remember
from fleet_agent.notify.run_notices import auth_failure, refusal_kind, run_notices
from fleet_agent.notify.settings import NotifyEnv, redact, scrub, split_urls
from fleet_agent.vast.errors import VastAuthError
from starter.cli.notify_commands import notify_test
from starter.views.render import notify_text, status_text
from testkit.notify_receivers import WebhookReceiver
from tests.helpers import idle_status
from tests.helpers.ports import free_port

T0 = datetime(2026, 12, 6, 9, 0, tzinfo=UTC)


def _event(kind: str = "frozen", subject: str = "", at: datetime = T0) -> NotifyEvent:
    return NotifyEvent.model_validate({"kind": kind, "subject": subject, "at": at})


def test_the_quiet_window_admits_one_per_kind_and_subject() -> None:
    config = AgentConfig(notify_quiet_minutes=30)
    sent = remember(_event(), {})
    assert not admit(_event(at=T0 + timedelta(minutes=29)), config, sent)
    assert admit(_event(at=T0 + timedelta(minutes=30)), config, sent)
    assert admit(_event("unfrozen"), config, sent)  # another kind
    a1 = remember(_event("approval_requested", "a1-1"), {})
    assert admit(_event("approval_requested", "a1-2"), config, a1)  # another subject


def test_only_the_configured_events_notify_and_the_defaults_need_a_human() -> None:
    assert "daily_digest" not in DEFAULT_NOTIFY_EVENTS
    assert "approval_requested" in AgentConfig().notify_events
    assert not admit(_event("daily_digest", "2026-12-05"), AgentConfig(), {})
    config = AgentConfig(notify_events=["daily_digest"])
    assert admit(_event("daily_digest", "2026-12-05"), config, {})
    assert not admit(_event("frozen"), config, {})
    assert admit(_event("test"), config, {})  # `notify test` always


def test_a_config_from_before_notifications_still_parses() -> None:
    old = AgentConfig.model_validate({"target_proofs_per_hour": 5})
    assert old.notify_quiet_minutes == 30 and old.notify_failed_runs == 3


def test_the_key_is_agent_kind_subject_and_time_bucket() -> None:
    key = idempotency_key("a", _event("approval_requested", "a1-1"), 30)
    assert key.startswith("a/approval_requested/a1-1/")
    same = idempotency_key("a", _event("approval_requested", "a1-1", T0 + timedelta(minutes=5)), 30)
    later = idempotency_key("a", _event("approval_requested", "a1-1", T0 + timedelta(hours=1)), 30)
    assert same == key and later != key


def test_an_approval_says_its_figures_links_to_its_page_and_gives_the_commands() -> None:
    event = NotifyEvent(
        kind="approval_requested",
        subject="a3-1",
        at=T0,
        facts={
            "tool": "create_instance",
            "dph": 0.412,
            "reason": "the offer costs $0.412/h",
            "expires_at": (T0 + timedelta(hours=1)).isoformat(),
        },
    )
    out = render("fleet-1", event, "https://ops.example.com/")
    assert out.title == "[fleet-1] approval a3-1 needed"
    assert out.link == "https://ops.example.com/approvals/a3-1"
    assert "+0.412 $/h" in out.body and "the offer costs" in out.body
    assert "Expires: 2026-12-06 10:00 UTC" in out.body
    assert "fleet-agent approve a3-1 --agent-id fleet-1" in out.body
    assert "fleet-agent deny a3-1 --agent-id fleet-1" in out.body
    expired = render("fleet-1", event.model_copy(update={"kind": "approval_expired"}), None)
    assert "expired" in expired.title and expired.link == ""


@pytest.mark.parametrize(
    "kind",
    [
        "under_target",
        "create_refused",
        "unfrozen",
        "runs_failing",
        "auth_failing",
        "agent_restarted",
        "llm_spend_capped",
        "market_loss",
        "daily_digest",
        "back_in_band",
        "test",
    ],
)
def test_every_kind_renders_a_title_naming_the_agent(kind: str) -> None:
    assert render("fleet-1", _event(kind, "s"), None).title.startswith("[fleet-1] ")


def test_a_url_is_shown_by_scheme_and_host_only() -> None:
    # A host that is no host name (Slack's first token) is hidden too.
    slack = "slack://T0AAAAAAA/B0BBBBBBB/secretXYZtoken123/#ops"
    mail = "mailtos://alice:pa55word-long@smtp.example.com?to=ops@example.com"
    assert split_urls(f"{slack}, {mail}\njson://h/x") == [slack, mail, "json://h/x"]
    assert redact(slack) == "slack://(hidden)" and redact(mail) == "mailtos://smtp.example.com"
    text = scrub(f"failed {mail} with pa55word-long, T0AAAAAAA, secretXYZtoken123", [slack, mail])
    assert "pa55word" not in text and "secretXYZ" not in text and "T0AAAAAAA" not in text
    assert "smtp.example.com" in text
    assert NotifyEnv.read({"FLEET_NOTIFY_URLS": " "}).url_list() == []


def test_a_mailto_with_two_recipients_stays_one_url() -> None:
    """apprise parts URLs only where another scheme:// follows; a split at
    every comma made `b@example.com` a destination of its own."""
    mail = "mailtos://alice:pw@smtp.example.com?to=a@example.com,b@example.com&from=f@example.com"
    assert split_urls(f"{mail}, json://h/x ;\n slack://T/B/C,") == [
        mail,
        "json://h/x",
        "slack://T/B/C",
    ]
    # A word that is no URL is kept, to be refused visibly, not dropped.
    assert split_urls("oops, json://h/x") == ["json://h/x", "oops"]


PERCENT = "mailtos://alice:p%40ss%2Fw0rd@smtp.example.com?to=ops%40example.com"


@pytest.mark.parametrize(
    "leak",
    [
        "p@ss/w0rd",  # the password as a library decodes it
        "p%40ss%2Fw0rd",  # as written in the URL
        "p%40ss%2fw0rd",  # encoded again, another hex case
        "p%40%73s%2Fw0rd",  # a letter encoded too
        "mailtos://alice:p@ss/w0rd@smtp.example.com?to=ops@example.com",  # the URL decoded
        "ops@example.com",  # a recipient, decoded
    ],
)
def test_a_secret_is_scrubbed_in_every_encoding(leak: str) -> None:
    text = scrub(f"login failed: {leak} (retry later)", [PERCENT])
    assert "w0rd" not in text and "p@ss" not in text and "ops@" not in text, text
    assert "ss%2" not in text.lower() and "ops%40" not in text, text
    assert "login failed" in text and "retry later" in text


def test_short_secrets_go_and_the_words_around_them_stay() -> None:
    """A piece shorter than ANYWHERE_CHARS was kept whole: a 5-letter
    password, a short topic or user stayed in the error text."""
    urls = [
        "mailtos://bob:abc12@smtp.example.com",
        "ntfys://ntfy.example.com/xq7",
        "tgram://12:AB/-9",
    ]
    text = scrub(
        "535 bob abc12 refused; topic xq7 closed (abc123, bobby); chat -9 gone; bot 12:AB", urls
    )
    assert "abc12 " not in text and " bob " not in text and " xq7 " not in text, text
    assert "12:AB" not in text and text.count("***") == 5, text
    # Longer words that merely contain them stay.
    assert "abc123" in text and "bobby" in text and "refused" in text


def test_a_run_reads_budget_and_rate_refusals_and_rejected_keys() -> None:
    over = budget_refusal([], T0, fleet_dph=30, added_dph=1, budget_usd=10)
    assert over is not None and refusal_kind(over) == "budget"
    rate = "Refused: 30 machine(s) rented in the last hour, the most max_creates_per_hour=30 allows"
    assert refusal_kind(rate) == "rate" and refusal_kind("Rented offer 1") is None
    key = vast_failure(
        VastAuthError("bad key", status=401, error="auth_error", method="GET", path="/instances/")
    ).message
    assert auth_failure(f"create_instance failed: {key}") == "vast.ai"
    assert auth_failure("Anthropic API returned HTTP 401 authentication_error: x") == "anthropic"
    assert auth_failure("Anthropic API returned HTTP 529 overloaded_error: x") is None
    notices = run_notices(
        [
            ToolResult(tool_use_id="t1", name="create_instance", content=over, is_error=True),
            ToolResult(tool_use_id="t2", name="get_fleet_status", content=key, is_error=True),
            ToolResult(tool_use_id="t3", name="create_instance", content=over),  # not an error
        ]
    )
    assert [(n.kind, n.subject) for n in notices] == [
        ("create_refused", "budget"),
        ("auth_failing", "vast.ai"),
    ]


async def test_notify_test_prints_each_destination_redacted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    dead = f"json://127.0.0.1:{free_port()}/dead-SECRET-path"
    with WebhookReceiver() as hook:
        live = hook.url("live-SECRET-path")
        env = NotifyEnv.model_validate({"FLEET_NOTIFY_URLS": f"{live} {dead}"})
        code = await notify_test(argparse.Namespace(agent_id="fleet-1"), env)
        out = capsys.readouterr().out
        assert code == 1
        assert "ok    json://127.0.0.1\n" in out and "FAIL  json://127.0.0.1: " in out
        assert "1 of 2 destination(s) reached" in out and "SECRET" not in out
        (post,) = hook.posts
        assert post.body["title"] == "[fleet-1] test notification"
    empty = await notify_test(argparse.Namespace(agent_id="x"), NotifyEnv.model_validate({}))
    assert empty == 1 and "set FLEET_NOTIFY_URLS" in capsys.readouterr().out


def test_status_shows_deliveries_and_the_latest_failure() -> None:
    failure = NotifyFailure(at=T0, kind="frozen", error="json://127.0.0.1: refused")
    st = idle_status(
        "a", run_count=0, history_length=1, notify_delivered=4, notify_failures=[failure]
    )
    assert notify_text(st) == (
        "4 delivered; 1 FAILED, latest 2026-12-06 09:00:00Z frozen: json://127.0.0.1: refused"
    )
    assert "notifications:" in status_text(st, T0)
    assert notify_text(st.model_copy(update={"notify_failures": []})) == "4 delivered, none failed"
