"""The prover image's proof parameter fetch (prover_image/params.py), against
a gateway on 127.0.0.1 serving fake parameter files of a few KB.

The lists have the shape Curio fetches from (lotus
``build/proof-params/parameters.json`` and ``srs-inner-product.json`` at
v1.36.2, the lotus curio's ``go.mod`` requires: name -> ``cid``, ``digest``,
``sector_size``), with real names and CIDs and the digests of the fake
files, computed as curio ``lib/fastparamfetch/paramfetch.go`` ``checkFile``
does (BLAKE2b-512, first 16 bytes in hex). The gateway answers as an IPFS
gateway does, ``GET <prefix><cid>`` with Range, and records each request.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fleet_agent.cuzk.credentials import Authority
from prover_image import entrypoint, params
from tests.helpers.ports import free_port
from tests.helpers.prover_image import ROOT, entrypoint_env, machine_creds

KIB2 = 2048
MIB8 = 8 * 1024 * 1024

#: Real entries' names and CIDs (lotus build/proof-params/parameters.json,
#: v1.36.2): the 2 KiB and 8 MiB PoRep .params and .vk; the digests are of
#: the fake contents below.
_POREP = "v28-stacked-proof-of-replication-merkletree-poseidon_hasher"
POREP_2K = (
    f"{_POREP}-8-0-0-sha256_hasher-032d3138d22506ec0082ed72b2dcba18df18477904e35bafee82b3793b06832f"
)
POREP_8M = (
    f"{_POREP}-8-0-0-sha256_hasher-ecd683648512ab1765faa2a5f14bab48f676e633467f0aa8aad4b55dcb0652bb"
)
PROOF_32G = "82a357d2f2ca81dc61bb45f4a762807aedee1b0a53fd6c4e77b46a01bfef7820"
ENTRIES = {
    f"{POREP_2K}.params": ("QmWceMgnWYLopMuM4AoGMvGEau7tNe5UK83XFjH5V9B17h", KIB2, 9000),
    f"{POREP_2K}.vk": ("QmamahpFCstMUqHi2qGtVoDnRrsXhid86qsfvoyCTKJqHr", KIB2, 700),
    f"{POREP_8M}.params": ("QmPXAPPuQtuQz7Zz3MHMAMEtsYwqM1o9H1csPLeiMUQwZH", MIB8, 7000),
    f"{POREP_8M}.vk": ("QmYCuipFyvVW1GojdMrjK1JnMobXtT4zRCZs1CGxjizs99", MIB8, 600),
}
#: lotus build/proof-params/srs-inner-product.json, v1.36.2 (name, cid, size 0).
SRS_NAME = "v28-fil-inner-product-v1.srs"
SRS_CID = "Qmdq44DjcQnFfU3PJcdX7J49GCqcUYszr1TxMbHtAkvQ3g"
SRS_LEN = 3000


def content(cid: str, length: int) -> bytes:
    """A fake file: `length` bytes that differ per CID."""
    out = b""
    counter = 0
    while len(out) < length:
        out += hashlib.sha256(f"{cid}/{counter}".encode()).digest()
        counter += 1
    return out[:length]


def blake(data: bytes) -> str:
    """paramfetch.go checkFile: hex.EncodeToString(blake2b.New512() sum[:16])."""
    return hashlib.blake2b(data, digest_size=64).hexdigest()[:32]


FILES = {cid: content(cid, n) for cid, _, n in ENTRIES.values()} | {
    SRS_CID: content(SRS_CID, SRS_LEN)
}
BY_NAME = {name: FILES[cid] for name, (cid, _, _) in ENTRIES.items()} | {SRS_NAME: FILES[SRS_CID]}
PARAMETERS_JSON = json.dumps(
    {
        name: {"cid": cid, "digest": blake(FILES[cid]), "sector_size": size}
        for name, (cid, size, _) in ENTRIES.items()
    },
    indent=2,
)
SRS_JSON = json.dumps(
    {SRS_NAME: {"cid": SRS_CID, "digest": blake(FILES[SRS_CID]), "sector_size": 0}}, indent=2
)
#: What Curio fetches for 2 KiB: its .params, every .vk, the SRS.
WANT_2K = {f"{POREP_2K}.params", f"{POREP_2K}.vk", f"{POREP_8M}.vk", SRS_NAME}


def corrupt(data: bytes) -> bytes:
    i = len(data) // 2
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]


@dataclass
class Gateway:
    """An IPFS gateway on 127.0.0.1: ``GET /ipfs/<cid>`` with ``Range:
    bytes=N-`` (206 with Content-Range, 416 past the end). `script` gives,
    per CID, how its next responses misbehave (then it behaves):
    ``bad`` (one byte flipped), ``cut:N`` (stops after N bytes of the body),
    ``stall:N`` (N bytes, then silence), ``trickle`` (64 bytes every 20 ms),
    ``ignore-range`` (200 and the whole file), ``503``; ``always`` holds
    modes used on every response."""

    files: dict[str, bytes]
    script: dict[str, list[str]] = field(default_factory=dict)
    always: dict[str, str] = field(default_factory=dict)
    #: (cid, Range header or None), in order.
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    url: str = ""

    def ranges(self, cid: str) -> list[str | None]:
        return [r for c, r in self.requests if c == cid]

    def next_mode(self, cid: str) -> str:
        if cid in self.always:
            return self.always[cid]
        queue = self.script.get(cid, [])
        return queue.pop(0) if queue else "ok"


def _handler(gw: Gateway) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            cid = self.path.removeprefix("/ipfs/")
            rng = self.headers.get("Range")
            gw.requests.append((cid, rng))
            if cid not in gw.files:
                self.send_error(404)
                return
            mode = gw.next_mode(cid)
            if mode == "503":
                self.send_error(503)
                return
            body = corrupt(gw.files[cid]) if mode == "bad" else gw.files[cid]
            m = re.fullmatch(r"bytes=(\d+)-", rng or "")
            if m is None or mode == "ignore-range":
                start, status = 0, 200
            else:
                start, status = int(m.group(1)), 206
            if start >= len(body) and status == 206:
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(status)
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            rest = body[start:]
            try:
                if mode.startswith("cut:"):
                    self.wfile.write(rest[: int(mode[4:])])
                elif mode.startswith("stall:"):
                    self.wfile.write(rest[: int(mode[6:])])
                    self.wfile.flush()
                    time.sleep(5.0)
                elif mode == "trickle":
                    for i in range(0, len(rest), 64):
                        self.wfile.write(rest[i : i + 64])
                        self.wfile.flush()
                        time.sleep(0.02)
                elif mode == "paced":
                    for i in range(0, len(rest), 1000):
                        self.wfile.write(rest[i : i + 1000])
                        self.wfile.flush()
                        time.sleep(0.01)
                else:
                    self.wfile.write(rest)
            except OSError:
                pass  # the client gave up on this response: that is the point

    return Handler


@pytest.fixture
def gateway() -> Iterator[Gateway]:
    gw = Gateway(files=dict(FILES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(gw))
    server.daemon_threads = True
    gw.url = f"http://127.0.0.1:{server.server_address[1]}/ipfs/"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield gw
    server.shutdown()
    server.server_close()


@dataclass
class Log:
    lines: list[str] = field(default_factory=list)

    def __call__(self, line: str) -> None:
        self.lines.append(line)

    def about(self, name: str) -> list[str]:
        return [x for x in self.lines if x.startswith(f"{name}:")]


def run_fetch(
    directory: Path, gw: Gateway, log: Log | None = None, **kw: object
) -> params.FetchReport:
    """fetch for 2 KiB sectors with short bounds (retries without waiting)."""
    options: dict[str, object] = {
        "timeout_s": 2.0,
        "retry_wait_s": 0.0,
        "lock_retry_s": 0.05,
        "log": log if log is not None else Log(),
    } | kw
    return params.fetch(directory, PARAMETERS_JSON, SRS_JSON, KIB2, gw.url, **options)  # type: ignore[arg-type]


def on_disk(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.name != params.LOCK_FILE}


# --- The rules -----------------------------------------------------------------------


def test_the_digest_is_blake2b_512_cut_to_32_hex(tmp_path: Path) -> None:
    # RFC 7693 Appendix A: BLAKE2b-512("abc") = ba80a53f981c4d0d6a2797b69f12f6e9 ...
    # (a BLAKE2b with a 16-byte output would give another value).
    (tmp_path / "abc").write_bytes(b"abc")
    assert params.digest(tmp_path / "abc") == "ba80a53f981c4d0d6a2797b69f12f6e9"


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("32GiB", 32 * 1024**3),
        ("64GiB", 64 * 1024**3),
        ("32gib", 32 * 1024**3),
        ("32G", 32 * 1024**3),
        ("512MiB", 512 * 1024**2),
        ("2KiB", 2048),
        ("34359738368", 34359738368),
    ],
)
def test_sector_sizes_read_as_curio_fetch_params_reads_them(text: str, size: int) -> None:
    assert params.parse_sector_size(text) == size


@pytest.mark.parametrize("text", ["", "32 GiBs", "GiB", "-1", "32XiB"])
def test_a_sector_size_that_is_no_size_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        params.parse_sector_size(text)


def test_curio_s_selection_on_the_real_32_gib_names() -> None:
    # lotus build/proof-params/parameters.json v1.36.2: the 32 GiB PoRep
    # entries and a 2 KiB one; a .vk of any size is fetched, a .params only of its size.
    porep = f"{_POREP}-8-8-0-sha256_hasher-{PROOF_32G}"
    doc = {
        f"{porep}.params": {
            "cid": "QmengpM684XLQfG8754ToonszgEg2bQeAGUan5uXTHUQzJ",
            "digest": "6a388072a518cf46ebd661f5cc46900a",
            "sector_size": 34359738368,
        },
        f"{porep}.vk": {
            "cid": "Qmf93EMrADXAK6CyiSfE8xx45fkMfR3uzKEPCvZC1n2kzb",
            "digest": "0c7b4aac1c40fdb7eb82bc355b41addf",
            "sector_size": 34359738368,
        },
        f"{POREP_2K}.params": {
            "cid": "QmWceMgnWYLopMuM4AoGMvGEau7tNe5UK83XFjH5V9B17h",
            "digest": "434fb1338ecfaf0f59256f30dde4968f",
            "sector_size": 2048,
        },
    }
    files = params.plan(json.dumps(doc), SRS_JSON, params.parse_sector_size("32GiB"))
    assert [f.name for f in files] == [f"{porep}.params", f"{porep}.vk", SRS_NAME]
    with pytest.raises(params.FetchError, match=r"no \.params file for 64\.0 GiB"):
        params.plan(json.dumps(doc), SRS_JSON, params.parse_sector_size("64GiB"))


@pytest.mark.parametrize(
    ("doc", "says"),
    [
        ("[]", "not a JSON object"),
        ("{", "not JSON"),
        (
            json.dumps({"../x.params": {"cid": "Qm1", "digest": "0" * 32, "sector_size": 2048}}),
            "malformed",
        ),
        (
            json.dumps({"a.params": {"cid": "Qm/../x", "digest": "0" * 32, "sector_size": 2048}}),
            "lacks",
        ),
        (
            json.dumps({"a.params": {"cid": "Qm1", "digest": "0" * 31, "sector_size": 2048}}),
            "lacks",
        ),
    ],
)
def test_a_malformed_list_is_refused(doc: str, says: str) -> None:
    with pytest.raises(params.FetchError, match=says):
        params.plan(doc, SRS_JSON, KIB2)


# --- Fetching ------------------------------------------------------------------------


def test_it_fetches_the_files_of_its_size_and_no_other_size_s_params(
    tmp_path: Path, gateway: Gateway
) -> None:
    log = Log()
    report = run_fetch(tmp_path / "p", gateway, log)
    assert set(on_disk(tmp_path / "p")) == WANT_2K
    for name, data in on_disk(tmp_path / "p").items():
        assert data == BY_NAME[name], name
    assert set(report.fetched) == WANT_2K and report.present == []
    assert report.received == sum(len(BY_NAME[n]) for n in WANT_2K)
    cid_8m_params = ENTRIES[f"{POREP_8M}.params"][0]
    assert cid_8m_params not in {c for c, _ in gateway.requests}
    # Curio's GET: the gateway prefix and the CID, with a Range from 0.
    assert [r for _, r in gateway.requests] == ["bytes=0-"] * 4
    assert any(line.startswith("all 4 files verified") for line in log.lines)


def test_files_present_and_valid_are_not_fetched_again(tmp_path: Path, gateway: Gateway) -> None:
    run_fetch(tmp_path / "p", gateway)
    gateway.requests.clear()
    (tmp_path / "p" / params.LOCK_FILE).unlink()
    report = run_fetch(tmp_path / "p", gateway)
    assert gateway.requests == []
    assert set(report.present) == WANT_2K and report.fetched == []
    # Curio takes the lock only when something must be fetched.
    assert not (tmp_path / "p" / params.LOCK_FILE).exists()


def test_a_partial_file_is_resumed_with_range(tmp_path: Path, gateway: Gateway) -> None:
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / name).write_bytes(BY_NAME[name][:4000])
    report = run_fetch(tmp_path / "p", gateway)
    assert gateway.ranges(cid) == ["bytes=4000-"]
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]
    assert report.received == sum(len(BY_NAME[n]) for n in WANT_2K) - 4000


def test_a_transfer_cut_short_is_resumed_where_it_stopped(tmp_path: Path, gateway: Gateway) -> None:
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    gateway.script[cid] = ["cut:2500", "cut:3000"]
    log = Log()
    run_fetch(tmp_path / "p", gateway, log)
    assert gateway.ranges(cid) == ["bytes=0-", "bytes=2500-", "bytes=5500-"]
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]
    assert any("connection closed at" in x for x in log.about(name)), log.lines


def test_a_stalled_transfer_is_cut_by_the_read_timeout_and_resumed(
    tmp_path: Path, gateway: Gateway
) -> None:
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    gateway.script[cid] = ["stall:1000"]
    began = time.monotonic()
    run_fetch(tmp_path / "p", gateway, timeout_s=0.3)
    assert time.monotonic() - began < 3
    assert gateway.ranges(cid) == ["bytes=0-", "bytes=1000-"]
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]


def test_a_trickle_under_the_lowest_rate_is_cut_and_resumed(
    tmp_path: Path, gateway: Gateway
) -> None:
    # 64 bytes every 20 ms (3.2 KB/s) never lets a read time out; the rate does.
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    gateway.script[cid] = ["trickle"]
    log = Log()
    run_fetch(tmp_path / "p", gateway, log, timeout_s=0.3, min_rate=16 * 1024)
    ranges = gateway.ranges(cid)
    assert len(ranges) == 2 and ranges[0] == "bytes=0-", ranges
    assert ranges[1] != "bytes=0-"  # resumed where the trickle left it
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]
    assert any("under 16.0 KiB/s" in x for x in log.about(name)), log.lines


def test_an_answer_that_ignores_range_restarts_the_file(tmp_path: Path, gateway: Gateway) -> None:
    # Curio appends whatever comes; appending a whole file to a part of it
    # would make a file that fails its digest. It starts over instead.
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / name).write_bytes(BY_NAME[name][:4000])
    gateway.script[cid] = ["ignore-range"]
    log = Log()
    run_fetch(tmp_path / "p", gateway, log)
    assert gateway.ranges(cid) == ["bytes=4000-"]
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]
    assert any("ignored the Range header" in x for x in log.about(name))


def test_a_corrupted_file_on_disk_is_removed_and_fetched_again(
    tmp_path: Path, gateway: Gateway
) -> None:
    name = f"{POREP_2K}.vk"
    cid = ENTRIES[name][0]
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / name).write_bytes(corrupt(BY_NAME[name]))
    log = Log()
    report = run_fetch(tmp_path / "p", gateway, log)
    # As Curio: resume first (nothing past its end: 416), check, remove, fetch it whole.
    assert gateway.ranges(cid) == [f"bytes={len(BY_NAME[name])}-", "bytes=0-"]
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]
    assert name in report.fetched
    assert any("on disk with digest" in x for x in log.about(name))
    assert any("removed, fetching it again (1/3)" in x for x in log.about(name))


def test_a_corrupted_download_is_removed_and_fetched_again(
    tmp_path: Path, gateway: Gateway
) -> None:
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    gateway.script[cid] = ["bad", "bad"]
    run_fetch(tmp_path / "p", gateway)
    assert gateway.ranges(cid) == ["bytes=0-"] * 3
    assert (tmp_path / "p" / name).read_bytes() == BY_NAME[name]


def test_a_gateway_that_keeps_sending_bad_bytes_fails_with_one_line(
    tmp_path: Path, gateway: Gateway
) -> None:
    name = f"{POREP_2K}.params"
    cid = ENTRIES[name][0]
    gateway.always[cid] = "bad"
    with pytest.raises(params.FetchError) as info:
        run_fetch(tmp_path / "p", gateway, attempts=2)
    message = str(info.value)
    assert "\n" not in message
    assert message == (
        f"{name} from 127.0.0.1: digest {blake(corrupt(BY_NAME[name]))} is not "
        f"{blake(BY_NAME[name])} after 2 downloads"
    )
    assert gateway.ranges(cid) == ["bytes=0-"] * 2
    assert not (tmp_path / "p" / name).exists()


def test_a_gateway_that_keeps_failing_is_given_up_on(tmp_path: Path, gateway: Gateway) -> None:
    cid = ENTRIES[f"{POREP_2K}.params"][0]
    gateway.always[cid] = "503"
    with pytest.raises(params.FetchError, match=r"HTTP 503 .*\(3 tries in a row without a byte"):
        run_fetch(tmp_path / "p", gateway, retries=3)
    assert len(gateway.ranges(cid)) == 3


def test_no_gateway_at_all_is_given_up_on(tmp_path: Path) -> None:
    gw = Gateway(files={}, url=f"http://127.0.0.1:{free_port()}/ipfs/")
    with pytest.raises(params.FetchError, match=r"cannot GET it .*2 tries in a row"):
        run_fetch(tmp_path / "p", gw, retries=2)


def test_progress_is_one_line_per_file_per_step(tmp_path: Path, gateway: Gateway) -> None:
    name = f"{POREP_2K}.params"
    gateway.script[ENTRIES[name][0]] = ["paced"]  # 1000 bytes every 10 ms
    log = Log()
    run_fetch(tmp_path / "p", gateway, log, progress_pct=25)
    steps = [
        int(m.group(1)) for x in log.about(name) if (m := re.search(r": (\d+) % \(", x)) is not None
    ]
    assert steps and steps == sorted(steps) and len(steps) <= 3, log.about(name)
    assert len({s // 25 for s in steps}) == len(steps)


# --- The lock ------------------------------------------------------------------------


def _hold_lock(directory: Path) -> subprocess.Popen[str]:
    """Another process holding fetch.lock as go-fs-lock does (an fcntl write
    lock on the whole file) until its stdin closes."""
    code = (
        "import fcntl, os, sys\n"
        f"fd = os.open({str(directory / params.LOCK_FILE)!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.lockf(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def test_it_waits_for_another_fetch_s_lock_and_checks_again(
    tmp_path: Path, gateway: Gateway
) -> None:
    directory = tmp_path / "p"
    directory.mkdir()
    holder = _hold_lock(directory)
    log = Log()
    result: list[params.FetchReport | BaseException] = []

    def go() -> None:
        try:
            result.append(run_fetch(directory, gateway, log))
        except BaseException as exc:
            result.append(exc)

    thread = threading.Thread(target=go)
    thread.start()
    try:
        deadline = time.monotonic() + 5
        while not any("held by another fetch" in x for x in log.lines):
            assert time.monotonic() < deadline and thread.is_alive(), (log.lines, result)
            time.sleep(0.01)
        # The holder fetches them meanwhile.
        for name in WANT_2K:
            (directory / name).write_bytes(BY_NAME[name])
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(5)
    thread.join(10)
    assert len(result) == 1 and isinstance(result[0], params.FetchReport), result
    assert gateway.requests == []
    assert set(result[0].present) == WANT_2K


@pytest.mark.timeout(10)  # unbounded, it would wait for ever
def test_the_wait_for_the_lock_is_bounded(tmp_path: Path, gateway: Gateway) -> None:
    directory = tmp_path / "p"
    directory.mkdir()
    holder = _hold_lock(directory)
    try:
        with pytest.raises(params.FetchError, match="stayed locked by another process"):
            run_fetch(directory, gateway, lock_wait_s=0.2)
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(5)
    assert gateway.requests == []


# --- The entrypoint ------------------------------------------------------------------


@pytest.fixture(scope="module")
def creds(authority: Authority) -> dict[str, str]:
    return machine_creds(authority, "fleet-agent/main/p1-aaaaaaaaaa")


def entry_env(tmp: Path, creds: dict[str, str], gw: Gateway) -> dict[str, str]:
    (tmp / "parameters.json").write_text(PARAMETERS_JSON)
    (tmp / "srs.json").write_text(SRS_JSON)
    # A cuzk that leaves a mark and ends at once.
    cuzk = f"sh -c 'touch {tmp / 'cuzk-started'}' cuzk"
    return entrypoint_env(tmp, creds, cuzk) | {
        "FLEET_PARAMS_SECTOR_SIZE": "2KiB",
        "FLEET_PARAMS_JSON": str(tmp / "parameters.json"),
        "FLEET_SRS_JSON": str(tmp / "srs.json"),
        "IPFS_GATEWAY": gw.url,
    }


def run_entrypoint(env: dict[str, str]) -> tuple[int, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "prover_image.entrypoint"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    return proc.returncode, proc.stdout + proc.stderr


def test_the_entrypoint_fetches_before_cuzk_starts(
    tmp_path: Path, creds: dict[str, str], gateway: Gateway
) -> None:
    code, out = run_entrypoint(entry_env(tmp_path, creds, gateway))
    assert code == 1 and "cuzk exited (0): stopping" in out, out
    assert set(on_disk(tmp_path / "params")) == WANT_2K
    assert (tmp_path / "cuzk-started").exists()
    assert out.index("params: all 4 files verified") < out.index("entrypoint: cuzk pid")


def test_the_entrypoint_stops_when_the_parameters_cannot_be_had(
    tmp_path: Path, creds: dict[str, str], gateway: Gateway
) -> None:
    name = f"{POREP_2K}.params"
    gateway.always[ENTRIES[name][0]] = "bad"
    code, out = run_entrypoint(entry_env(tmp_path, creds, gateway))
    assert code == entrypoint.EXIT_PARAMS, out
    last = out.strip().splitlines()[-1]
    assert last.startswith(
        f"entrypoint: cannot fetch the proof parameters: {name} from 127.0.0.1: "
    )
    assert last.endswith(f"after {params.ATTEMPTS} downloads"), last
    assert not (tmp_path / "cuzk-started").exists()


def test_fleet_skip_params_fetches_nothing(
    tmp_path: Path, creds: dict[str, str], gateway: Gateway
) -> None:
    env = entry_env(tmp_path, creds, gateway) | {"FLEET_SKIP_PARAMS": "1"}
    code, out = run_entrypoint(env)
    assert code == 1 and "FLEET_SKIP_PARAMS=1: the proof parameters are not fetched" in out, out
    assert gateway.requests == []
    assert (tmp_path / "cuzk-started").exists()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        ({"FLEET_PARAMS_SECTOR_SIZE": "lots"}, "FLEET_PARAMS_SECTOR_SIZE is not a size"),
        ({"FLEET_PARAMS_SECTOR_SIZE": "64GiB"}, "no .params file for 64.0 GiB sectors"),
        ({"IPFS_GATEWAY": "ftp://x/ipfs/"}, "IPFS_GATEWAY is not an http(s) URL"),
        ({"FLEET_PARAMS_JSON": "/nonexistent/parameters.json"}, "FLEET_PARAMS_JSON: cannot read"),
        ({"FLEET_SKIP_PARAMS": "yes"}, "FLEET_SKIP_PARAMS is not 0 or 1"),
    ],
)
def test_a_bad_params_setting_refuses_to_start(
    tmp_path: Path, creds: dict[str, str], gateway: Gateway, change: dict[str, str], says: str
) -> None:
    code, out = run_entrypoint(entry_env(tmp_path, creds, gateway) | change)
    assert code == 2 and says in out, out
    assert gateway.requests == []
    assert not (tmp_path / "cuzk-started").exists()


def test_the_image_ships_the_fetch_and_its_lists() -> None:
    dockerfile = (ROOT / "prover_image" / "Dockerfile").read_text()
    copy = next(x for x in dockerfile.splitlines() if x.endswith("/opt/fleet/prover_image/"))
    assert "prover_image/params.py" in copy.split()
    assert "COPY --from=cuzk /out/proof-params/ /opt/fleet/proof-params/" in dockerfile
    for path in (entrypoint.PARAMS_JSON, entrypoint.SRS_JSON):
        assert path.startswith("/opt/fleet/proof-params/")
        assert "build/proof-params/$f" in dockerfile and Path(path).name in dockerfile
