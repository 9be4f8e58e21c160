"""The Curio stand-in's text, byte for byte, without a server: FIL amounts
(lotus chain/types/fil.go), addresses (go-address), Go's number and
duration forms, go-jsonrpc's handling of a request body
(simulator/curio/jsonrpc.py), and the metrics exposition."""

from __future__ import annotations

import json

import pytest

from simulator.curio.address import AddressError, actor_id, key_address, parse_address
from simulator.curio.fil import FilError, fil_short, fil_unitless, parse_fil
from simulator.curio.jsonrpc import Method, MethodError, serve
from simulator.curio.proofshare_rpc import go_duration, payment_amount
from simulator.curio.webrpc import go_float, psvc_metrics
from simulator.snark_market.node import Payment


@pytest.mark.parametrize(
    ("atto", "short", "unitless"),
    [
        (0, "0", "0"),
        (1, "1 aFIL", "0.000000000000000001"),
        (999, "999 aFIL", "0.000000000000000999"),
        (1_000, "1 fFIL", "0.000000000000001"),
        (1_234_567, "1.235 pFIL", "0.000000000001234567"),
        (5 * 10**15, "5 mFIL", "0.005"),
        (8 * 10**15, "8 mFIL", "0.008"),
        (1_500_500 * 10**9, "1.501 mFIL", "0.0015005"),  # FloatString(3) rounds half up
        (10**18, "1 FIL", "1"),
        (12 * 10**18, "12 FIL", "12"),
        (1_500 * 10**18, "1500 FIL", "1500"),  # lotus's Short has no unit above FIL
    ],
)
def test_fil_amounts_read_as_lotus_writes_them(atto: int, short: str, unitless: str) -> None:
    assert (fil_short(atto), fil_unitless(atto)) == (short, unitless)


@pytest.mark.parametrize(
    ("text", "atto"),
    [
        ("0.005", 5 * 10**15),
        ("1", 10**18),
        ("5fil", 5 * 10**18),
        ("5 FIL", 5 * 10**18),
        (".5", 5 * 10**17),
        ("100afil", 100),
        ("100 attofil", 100),
    ],
)
def test_parse_fil_takes_what_lotus_takes(text: str, atto: int) -> None:
    assert parse_fil(text) == atto


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("abc", 'unrecognized suffix: "abc"'),
        ("-1", 'unrecognized suffix: "-1"'),
        ("", 'failed to parse "" as a decimal number'),
        ("1.2.3", 'failed to parse "1.2.3" as a decimal number'),
        ("0.5afil", 'invalid attoFIL value: "0.5"'),
        ("0.0000000000000000001", 'invalid FIL value: "0.0000000000000000001"'),
        ("1" * 51, "string length too large: 51"),
    ],
)
def test_parse_fil_refuses_as_lotus_refuses(text: str, message: str) -> None:
    with pytest.raises(FilError) as refused:
        parse_fil(text)
    assert str(refused.value) == message


def test_key_addresses_parse_and_their_checksum_is_checked() -> None:
    wallet = key_address("w")
    assert wallet.startswith("f1") and len(wallet) == 41
    assert parse_address(wallet) is not None
    ident = parse_address("f01234")
    assert ident is not None and (ident.protocol, ident.id) == (0, 1234)
    assert parse_address("") is None  # go-address's undefined address
    assert actor_id(wallet) == actor_id(wallet) >= 10_000
    broken = wallet[:10] + ("a" if wallet[10] != "a" else "b") + wallet[11:]
    for text, message in [
        (broken, "invalid address checksum"),
        ("x1abc", "unknown address network"),
        ("f9abc", "unknown address protocol"),
        ("f0x", "invalid address payload"),
        ("f1", "invalid address length"),
        ("f1ABC", "illegal base32 data at input byte 0"),
    ]:
        with pytest.raises(AddressError) as refused:
            parse_address(text)
        assert str(refused.value) == message


@pytest.mark.parametrize(
    ("value", "g", "json_form"),
    [
        (0.0, "0", "0"),
        (3.0, "3", "3"),
        (-2.0, "-2", "-2"),
        (5.5, "5.5", "5.5"),
        (123456.0, "123456", "123456"),
        (1234567.0, "1.234567e+06", "1234567"),
        (1e6, "1e+06", "1000000"),
        (0.0001, "0.0001", "0.0001"),
        (0.00001, "1e-05", "0.00001"),
        (3e-7, "3e-07", "3e-7"),
        (1e21, "1e+21", "1e+21"),
    ],
)
def test_floats_are_written_in_go_s_forms(value: float, g: str, json_form: str) -> None:
    assert go_float(value) == g
    assert go_float(value, json_form=True) == json_form


def test_apayment_amount_is_this_voucher_less_the_one_before() -> None:
    paid = [Payment(7, f"c{n}", n, 10**15 * n * n, 0.0) for n in (1, 2, 3)]
    assert payment_amount("c3", paid) == "5 mFIL"  # 9 - 4 mFIL
    # Nonce 1's predecessor is missing: the whole cumulative amount.
    assert payment_amount("c1", paid) == "1 mFIL"
    # No payment row, or nonce 0 (Curio's "paymentNonce > 0" test): n/a.
    assert payment_amount("c9", paid) == "n/a"
    assert payment_amount("z", [Payment(7, "z", 0, 10**15, 0.0)]) == "n/a"


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (45, "45s"), (120, "2m0s"), (3723, "1h2m3s")]
)
def test_durations_read_as_go_writes_them(seconds: int, text: str) -> None:
    assert go_duration(seconds) == text


def _methods() -> dict[str, Method]:
    def fails() -> None:
        raise MethodError("X: failed to do <it> & more")

    return {
        "CurioWeb.Get": Method((), lambda: {"a": "μ<>"}),
        "CurioWeb.Set": Method(("bool", "string", "string"), lambda *args: None),
        "CurioWeb.Take": Method(("int64",), lambda n: [n]),
        "CurioWeb.Fails": Method((), fails),
    }


def _call(method: str, params: object = (), request_id: object = 1) -> bytes:
    body: dict[str, object] = {"jsonrpc": "2.0", "method": method, "params": params}
    if request_id is not ...:
        body["id"] = request_id
    return json.dumps(body).encode()


def _ok(result: str, request_id: str = "1") -> bytes:
    """The success envelope written out by hand: sorted keys, a newline."""
    return f'{{"id":{request_id},"jsonrpc":"2.0","result":{result}}}\n'.encode()


def _err(code: int, message: str, request_id: str = "1") -> bytes:
    return (
        f'{{"error":{{"code":{code},"message":"{message}"}},"id":{request_id},"jsonrpc":"2.0"}}\n'
    ).encode()


_GET = '{"a":"μ\\u003c\\u003e"}'
_BAD_BOOL = (
    "unmarshaling params for 'CurioWeb.Set' (param: *bool): "
    "json: cannot unmarshal string into Go value of type bool"
)
_BAD_INT = (
    "unmarshaling params for 'CurioWeb.Take' (param: *int64): "
    "json: cannot unmarshal number 1.5 into Go value of type int64"
)
_BAD_ARRAY = (
    "unmarshaling param array: json: cannot unmarshal object into Go value of type []jsonrpc.param"
)


@pytest.mark.parametrize(
    ("body", "status", "answer"),
    [
        (_call("CurioWeb.Get", []), 200, _ok(_GET)),
        (_call("CurioWeb.Set", [True, "", "1"]), 200, _ok("null")),
        (_call("CurioWeb.Get", None, "x"), 200, _ok(_GET, '"x"')),
        (_call("CurioWeb.Take", [7], 2.5), 200, _ok("[7]", "2.5")),
        (
            _call("CurioWeb.Fails"),
            200,
            _err(1, "X: failed to do \\u003cit\\u003e \\u0026 more"),
        ),
        (_call("CurioWeb.Get", [], ...), 200, b""),  # a notification
        (b"  \n", 400, _err(-32600, "Invalid request", "null")),
        (b"{bad", 500, _err(-32700, "Parse error", "null")),
        (b'"text"', 500, _err(-32700, "Parse error", "null")),
        (_call("CurioWeb.Nope"), 500, _err(-32601, "method 'CurioWeb.Nope' not found")),
        (
            _call("CurioWeb.Set", [True]),
            500,
            _err(-32602, "wrong param count (method 'CurioWeb.Set'): 1 != 3"),
        ),
        (_call("CurioWeb.Set", {"enabled": True}), 500, _err(-32700, _BAD_ARRAY)),
        (_call("CurioWeb.Set", ["yes", "", ""]), 500, _err(-32700, _BAD_BOOL)),
        (
            b'{"jsonrpc":"2.0","method":"CurioWeb.Take","params":[1.5],"id":3}',
            500,
            _err(-32700, _BAD_INT, "3"),
        ),
        (
            b'{"JSONRPC":"2.0","Method":"CurioWeb.Take","Params":[null],"ID":4} trailing',
            200,
            _ok("[0]", "4"),
        ),
        (
            b'[{"jsonrpc":"2.0","method":"CurioWeb.Take","params":[1],"id":1},'
            b'{"jsonrpc":"2.0","method":"CurioWeb.Take","params":[2]},'
            b'{"jsonrpc":"2.0","method":"CurioWeb.Nope","id":3}]',
            200,
            b"["
            + _ok("[1]")
            + b",,"
            + _err(-32601, "method 'CurioWeb.Nope' not found", "3")
            + b"]",
        ),
        (b"[]", 400, _err(-32600, "Invalid request", "null")),
    ],
)
def test_go_jsonrpc_answers_a_body_as_curio_s_server_does(
    body: bytes, status: int, answer: bytes
) -> None:
    assert serve(body, _methods()) == (status, answer)


def test_the_psvc_exposition_is_the_exporter_s() -> None:
    text = psvc_metrics(queue_count=3, asks_created=1234567, others={"need_asks": -2.0})
    assert text == (
        "# HELP curio_psvc_proofshare_need_asks Number of asks still needed in current Do "
        "loop iteration\n"
        "# TYPE curio_psvc_proofshare_need_asks gauge\n"
        "curio_psvc_proofshare_need_asks -2\n"
        "# HELP curio_psvc_proofshare_newly_added_total Total number of new work requests "
        "inserted locally\n"
        "# TYPE curio_psvc_proofshare_newly_added_total counter\n"
        "curio_psvc_proofshare_newly_added_total 1.234567e+06\n"
        "# HELP curio_psvc_proofshare_queue_count Current proofshare request queue count\n"
        "# TYPE curio_psvc_proofshare_queue_count gauge\n"
        "curio_psvc_proofshare_queue_count 3\n"
    )
