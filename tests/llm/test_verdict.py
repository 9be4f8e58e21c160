"""The `<verdict>` tag at the end of a run's answer (`fleet_agent.llm.verdict`):
parsed, reported when bad, stripped. Pure: no server."""

from __future__ import annotations

import json

import pytest

from fleet_agent.llm.verdict import parse_verdict, strip_verdict
from fleet_agent.models import Verdict
from tests.helpers.loop import TAG


@pytest.mark.parametrize("action", [True, False])
@pytest.mark.parametrize("changed", [True, False])
def test_valid_verdict(action: bool, changed: bool) -> None:
    text = "All good.\n" + TAG.format(a=json.dumps(action), s=json.dumps(changed)) + "\n  \n"
    assert parse_verdict(text) == (Verdict(action=action, state_changed=changed), "")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("No tag at all.", "no <verdict> tag"),
        ("", "no <verdict> tag"),
        ("<verdict>{action: true}</verdict>", "not JSON"),
        ("<verdict></verdict>", "not JSON"),
        ('<verdict>{"action": TRUE, "state_changed": false}</verdict>', "not JSON"),
        ("<verdict>[true, false]</verdict>", "JSON object"),
        ('<verdict>{"action": true}</verdict>', "lacks state_changed"),
        ("<verdict>{}</verdict>", "lacks action, state_changed"),
        ('<verdict>{"action": 1, "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": "true", "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": null, "state_changed": false}</verdict>', "booleans"),
        ('<verdict>{"action": true, "state_changed": false}</verdict> thanks!', "not at the end"),
        ('<verdict>{"action": true, "state_changed": false}</verdict>', None),
    ],
)
def test_bad_verdicts_are_reported(text: str, error: str | None) -> None:
    verdict, message = parse_verdict(text)
    if error is None:
        assert verdict is not None and message == ""
    else:
        assert verdict is None and error in message


def test_the_last_of_several_tags_counts() -> None:
    text = (
        "Earlier I wrote " + TAG.format(a="true", s="true") + " but then:\n"
        "Final.\n" + TAG.format(a="false", s="false")
    )
    assert parse_verdict(text) == (Verdict(action=False, state_changed=False), "")


def test_tag_is_case_insensitive_and_json_may_span_lines() -> None:
    text = 'Done.\n<VERDICT>{\n  "action": true,\n  "state_changed": false\n}</Verdict>'
    assert parse_verdict(text) == (Verdict(action=True, state_changed=False), "")


def test_a_stray_opening_tag_in_prose_does_not_hide_the_verdict() -> None:
    text = "I end with a <verdict> tag as asked.\n" + TAG.format(a="true", s="false")
    assert parse_verdict(text) == (Verdict(action=True, state_changed=False), "")


def test_strip_verdict() -> None:
    assert strip_verdict("Hi.\n" + TAG.format(a="true", s="true") + "\n") == "Hi."
