"""Fetch the Filecoin proof parameters before cuzk starts, the way Curio does.

What it touches: the parameter directory (``FIL_PROOFS_PARAMETER_CACHE``):
the files it downloads, ``fetch.lock`` in it, and partial files it resumes;
HTTP(S) GETs to an IPFS gateway; stderr (one line per event). Nothing of
ours goes out: a GET carries the file's CID and a Range header, no
credential.

The rules, each from curio ``lib/fastparamfetch/paramfetch.go`` (the same at
the commit prover_image/Dockerfile pins and at curio's HEAD) unless named:

- **Which files** (``GetParams``): every entry of the parameters list
  except the ``.params`` files of other sector sizes (so the ``.vk`` files of
  every size come too: they are small), and every entry of the SRS list.
  Curio passes lotus ``build/proof-params/parameters.json`` and
  ``srs-inner-product.json`` (``proofparams.ParametersJSON()``/``SrsJSON()``,
  lotus ``build/proof-params/parameters.go``, lotus v1.36.2 per curio's
  ``go.mod``); the image ships those two files.
- **Where from** (``doFetch``): ``$IPFS_GATEWAY`` or `DEFAULT_GATEWAY`,
  followed by the entry's ``cid``.
- **Resuming** (``doFetch``): a file on disk that does not verify is
  appended to from its size with ``Range: bytes=<size>-``.
- **The digest** (``checkFile``): BLAKE2b-512 over the whole file; the first
  16 bytes, 32 hex characters, must equal the entry's ``digest``.
- **A file already there and verified** is not fetched, and the lock is not
  taken for it (``maybeFetchAsync``).
- **Bad after download** (``maybeFetchAsync``): it is removed and fetched
  again (Curio: once; here up to ``attempts`` downloads in all), then the
  fetch fails.
- **The lock** (``getFsLock``): ``fetch.lock`` in the parameter directory
  (go-fs-lock, an fcntl write lock on the whole file: go4.org ``lock``
  ``lock_unix.go``), taken only when something must be fetched, retried
  every `LOCK_RETRY_S`; whoever waited for it checks the files again, since
  the holder may have fetched them.

Where it departs from Curio, for a machine nobody watches: transport
failures are retried from where the file stopped (at most `RETRIES` in a
row that bring no byte), every request is bounded (`TIMEOUT_S` for the
connection and for each read, and at least `MIN_RATE` over each
`TIMEOUT_S`, aria2c's ``--lowest-speed-limit 16K`` that Curio passes), a
response that ignores the Range header restarts the file rather than being
appended to it, the wait for the lock is bounded (`LOCK_WAIT_S`), and
aria2c is not used (Curio tries it first when it is on PATH).

Standard library only (Python 3.11+), like the rest of prover_image/.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import errno
import fcntl
import hashlib
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

_T = TypeVar("_T")

#: curio lib/fastparamfetch/paramfetch.go, ``gateway``.
DEFAULT_GATEWAY = "https://pub-08ae819c828244bdbe5f615fd8c5e144.r2.dev/ipfs/"
#: The same file, ``lockFile`` and ``lockRetry``.
LOCK_FILE = "fetch.lock"
LOCK_RETRY_S = 10.0
#: How long to wait for another process's lock before giving up (Curio
#: waits for ever; the 32 GiB set is ~47 GiB, hours on a slow link).
LOCK_WAIT_S = 4 * 3600.0
#: Hex characters of the BLAKE2b-512 digest compared (paramfetch.go
#: ``checkFile``: ``hex.EncodeToString(sum[:16])``).
DIGEST_HEX = 32
#: Downloads of a file whose digest is wrong, in all (Curio makes 2).
ATTEMPTS = 3
#: Transport failures in a row, without a byte gained, before giving up;
#: and the wait between them (aria2c ``-m100 --retry-wait 10`` in Curio).
RETRIES = 10
RETRY_WAIT_S = 10.0
#: Seconds for a connection and for each read of a response.
TIMEOUT_S = 60.0
#: Bytes per second a response must keep up over each `TIMEOUT_S` window
#: (aria2c ``--lowest-speed-limit 16K`` in Curio).
MIN_RATE = 16 * 1024
#: One progress line per file per this many per cent.
PROGRESS_PCT = 10
#: Files fetched (and checked) at once; Curio runs one goroutine per file.
WORKERS = 4
CHUNK = 1024 * 1024

_CID = re.compile(r"[A-Za-z0-9]{1,128}")
_DIGEST = re.compile(r"[0-9a-f]{32}")
#: docker/go-units ``RAMInBytes`` (curio cmd/curio/main.go ``fetch-params``
#: parses its argument with it): a number, then k/m/g/t/p, ``i`` and ``b``
#: optional, any case, all powers of 1024.
_SIZE = re.compile(r"(\d+(?:\.\d+)?) ?([kmgtp])?i?b?", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3, "t": 1024**4, "p": 1024**5}


class FetchError(Exception):
    """The parameters cannot be had; the message is one line saying why."""


class _Transient(Exception):
    """A request that failed in a way worth trying again (resuming)."""


class _Stopped(Exception):
    """Another file failed: this one stops too."""


@dataclass(frozen=True, slots=True)
class ParamFile:
    """One entry of parameters.json or the SRS json (paramfetch.go ``paramFile``)."""

    name: str
    cid: str
    digest: str
    sector_size: int


@dataclass(slots=True)
class FetchReport:
    """What a fetch found and did."""

    #: Files that were on disk and verified.
    present: list[str] = field(default_factory=list)
    #: Files downloaded (and verified).
    fetched: list[str] = field(default_factory=list)
    #: Bytes received over the network.
    received: int = 0


def say(message: str) -> None:
    """One line on stderr (the container's log)."""
    print(f"params: {message}", file=sys.stderr, flush=True)


def parse_sector_size(text: str) -> int:
    """Bytes in a sector size written as Curio's ``fetch-params`` takes it
    ("32GiB", "64GiB", "2KiB", "8MiB", "512MiB", or bytes); ValueError else."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a size: {text!r}")
    return int(float(m.group(1)) * _UNITS[(m.group(2) or "").lower()])


def parse_list(text: bytes | str, source: str) -> list[ParamFile]:
    """The entries of a parameters.json-shaped document (name -> cid,
    digest, sector_size); FetchError naming `source` when it is not one."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise FetchError(f"{source} is not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise FetchError(f"{source} is not a JSON object")
    out = []
    for name, info in doc.items():
        # Names become paths in the parameter directory: a plain file name only.
        if not isinstance(info, dict) or "/" in name or name.startswith(".") or not name:
            raise FetchError(f"{source}: entry {name[:80]!r} is malformed")
        cid, digest, size = info.get("cid"), info.get("digest"), info.get("sector_size")
        if (
            not isinstance(cid, str)
            or not _CID.fullmatch(cid)
            or not isinstance(digest, str)
            or not _DIGEST.fullmatch(digest)
            or not isinstance(size, int)
            or size < 0
        ):
            raise FetchError(f"{source}: entry {name[:80]!r} lacks a cid, digest or sector_size")
        out.append(ParamFile(name=name, cid=cid, digest=digest, sector_size=size))
    return out


def select(
    params: Iterable[ParamFile], srs: Iterable[ParamFile], sector_size: int
) -> list[ParamFile]:
    """What Curio fetches for `sector_size` (paramfetch.go ``GetParams``):
    every entry but the ``.params`` of another size, and every SRS entry."""
    wanted = [p for p in params if p.sector_size == sector_size or not p.name.endswith(".params")]
    return wanted + list(srs)


def plan(parameters_json: bytes | str, srs_json: bytes | str, sector_size: int) -> list[ParamFile]:
    """The files `fetch` wants for `sector_size`; FetchError when a list is
    malformed or has no ``.params`` file of that size (a size Curio has no
    proofs for)."""
    files = select(
        parse_list(parameters_json, "the parameters list"),
        parse_list(srs_json, "the SRS list"),
        sector_size,
    )
    if not any(f.name.endswith(".params") for f in files):
        raise FetchError(
            f"the parameters list has no .params file for {_size(sector_size)} sectors"
        )
    return files


def digest(path: Path, stop: threading.Event | None = None) -> str:
    """paramfetch.go ``checkFile``'s digest of `path`: the first 16 bytes
    of its BLAKE2b-512, in hex (OSError when it cannot be read)."""
    h = hashlib.blake2b(digest_size=64)
    with path.open("rb") as f:
        while chunk := f.read(4 * CHUNK):
            if stop is not None and stop.is_set():
                raise _Stopped
            h.update(chunk)
    return h.hexdigest()[:DIGEST_HEX]


def _size(n: float) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def _content_range(value: str | None) -> tuple[int, int | None]:
    """(first byte, total or None) of ``Content-Range: bytes a-b/total``."""
    m = re.fullmatch(r"bytes (\d+)-\d+/(\d+|\*)", (value or "").strip())
    if m is None:
        raise _Transient(f"a 206 answer with Content-Range {str(value)[:60]!r}")
    return int(m.group(1)), None if m.group(2) == "*" else int(m.group(2))


@contextlib.contextmanager
def _locked(
    directory: Path,
    retry_s: float,
    wait_s: float,
    log: Callable[[str], None],
) -> Iterator[bool]:
    """Hold ``fetch.lock`` (go-fs-lock's: an fcntl write lock on the whole,
    empty, file); yields whether another process held it first."""
    path = directory / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise FetchError(f"cannot open {path}: {exc.strerror}") from None
    try:
        waited = False
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise FetchError(f"cannot lock {path}: {exc.strerror}") from None
            if time.monotonic() >= deadline:
                raise FetchError(f"{path} stayed locked by another process for {wait_s:g} s")
            if not waited:
                log(f"{path} is held by another fetch; trying again every {retry_s:g} s")
            waited = True
            time.sleep(retry_s)
        yield waited
    finally:
        os.close(fd)  # closing drops the lock


class _Fetcher:
    """One fetch's settings and shared state (threads: one per file)."""

    def __init__(
        self,
        directory: Path,
        gateway: str,
        *,
        attempts: int,
        retries: int,
        timeout_s: float,
        min_rate: int,
        retry_wait_s: float,
        progress_pct: int,
        workers: int,
        log: Callable[[str], None],
    ) -> None:
        self.directory = directory
        self.gateway = gateway if gateway.endswith("/") else gateway + "/"
        # The host only, in lines and errors: a gateway URL may carry a token.
        self.host = urllib.parse.urlsplit(self.gateway).hostname or "the gateway"
        self.attempts = max(1, attempts)
        self.retries = max(1, retries)
        self.timeout_s = timeout_s
        self.min_rate = min_rate
        self.retry_wait_s = retry_wait_s
        self.progress_pct = max(1, min(100, progress_pct))
        self.workers = max(1, workers)
        self.log = log
        self.stop = threading.Event()
        self.received = 0
        self._count = threading.Lock()
        # No proxy or redirect handler surprises beyond urllib's defaults;
        # redirects keep the Range header (urllib copies non-content headers).
        self.opener = urllib.request.build_opener()

    def check_all(self, files: list[ParamFile], report: FetchReport) -> list[ParamFile]:
        """The files that are not on disk with their digest (the rest go to
        `report.present`)."""

        def check(f: ParamFile) -> bool:
            path = self.directory / f.name
            try:
                got = digest(path, self.stop)
            except FileNotFoundError:
                return False
            except OSError as exc:
                raise FetchError(f"cannot read {path}: {exc.strerror}") from None
            if got == f.digest:
                return True
            self.log(f"{f.name}: on disk with digest {got}, not {f.digest}: fetching the rest")
            return False

        oks = self._each(files, check)
        report.present.extend(f.name for f, ok in zip(files, oks, strict=True) if ok)
        return [f for f, ok in zip(files, oks, strict=True) if not ok]

    def fetch_all(self, files: list[ParamFile], report: FetchReport) -> None:
        """Download and verify each of `files`; FetchError at the first that cannot be had."""
        self._each(files, self.fetch_one)
        report.fetched.extend(f.name for f in files)

    def _each(self, files: list[ParamFile], work: Callable[[ParamFile], _T]) -> list[_T]:
        if not files:
            return []
        with concurrent.futures.ThreadPoolExecutor(min(self.workers, len(files))) as pool:
            futures = [pool.submit(work, f) for f in files]
            first: BaseException | None = None
            for fut in concurrent.futures.as_completed(futures):
                exc = fut.exception()
                if exc is not None and not isinstance(exc, _Stopped) and first is None:
                    first = exc
                    self.stop.set()  # the others stop at their next chunk
        if first is not None:
            raise first
        return [fut.result() for fut in futures]

    def fetch_one(self, f: ParamFile) -> None:
        """Download `f` (resuming what is there), verify it; a bad file is
        removed and fetched again, up to `attempts` downloads."""
        path = self.directory / f.name
        got = ""
        for attempt in range(1, self.attempts + 1):
            self._download(f, path)
            try:
                got = digest(path, self.stop)
            except OSError as exc:
                raise FetchError(f"cannot read {path}: {exc.strerror}") from None
            if got == f.digest:
                self.log(f"{f.name}: ok ({_size(path.stat().st_size)}, digest {got})")
                return
            self._remove(path)
            if attempt < self.attempts:
                self.log(
                    f"{f.name}: digest {got} is not {f.digest}: removed, fetching it again "
                    f"({attempt}/{self.attempts})"
                )
        raise FetchError(
            f"{f.name} from {self.host}: digest {got} is not {f.digest} "
            f"after {self.attempts} downloads"
        )

    def _remove(self, path: Path) -> None:
        try:
            path.unlink(missing_ok=True)
        except OSError as exc:
            raise FetchError(f"cannot remove {path}: {exc.strerror}") from None

    def _download(self, f: ParamFile, path: Path) -> None:
        """Bring `path` to the whole of the file, resuming from what is there."""
        url = self.gateway + f.cid
        failures = 0
        while True:
            if self.stop.is_set():
                raise _Stopped
            offset = path.stat().st_size if path.exists() else 0
            try:
                self._request(f, path, url, offset)
                return
            except _Transient as exc:
                now = path.stat().st_size if path.exists() else 0
                failures = 0 if now > offset else failures + 1
                if failures >= self.retries:
                    raise FetchError(
                        f"{f.name} from {self.host}: {exc} "
                        f"({failures} tries in a row without a byte gained)"
                    ) from None
                self.log(f"{f.name}: {exc}; resuming at {_size(now)} in {self.retry_wait_s:g} s")
                if self.stop.wait(self.retry_wait_s):
                    raise _Stopped from None

    def _request(self, f: ParamFile, path: Path, url: str, offset: int) -> None:
        """One GET from `offset` on, appended to `path`; _Transient when it
        fails or stops short, returns when the server has no more."""
        req = urllib.request.Request(
            url, headers={"Range": f"bytes={offset}-", "User-Agent": "fleet-prover-params"}
        )
        try:
            resp = self.opener.open(req, timeout=self.timeout_s)
        except urllib.error.HTTPError as exc:
            exc.close()
            if exc.code == 416:
                return  # nothing past `offset`: the digest check says if it is whole
            raise _Transient(f"HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise _Transient(f"cannot GET it ({reason})") from None
        with resp:
            length = resp.headers.get("Content-Length")
            if resp.status == 206:
                start, total = _content_range(resp.headers.get("Content-Range"))
                if start != offset:
                    raise _Transient(f"asked for bytes from {offset}, answered from {start}")
            elif resp.status == 200:
                if offset:
                    self.log(f"{f.name}: {self.host} ignored the Range header: starting over")
                offset, total = 0, None
            else:
                raise _Transient(f"HTTP {resp.status}")
            if total is None and length is not None and length.isdigit():
                total = offset + int(length)
            self._receive(f, path, resp, offset, total)

    def _receive(
        self,
        f: ParamFile,
        path: Path,
        resp: http.client.HTTPResponse,
        offset: int,
        total: int | None,
    ) -> None:
        of = f" of {_size(total)}" if total is not None else ""
        whole = f" {_size(total)}" if total is not None else ""
        resuming = f", resuming at {_size(offset)}" if offset else ""
        self.log(f"{f.name}: fetching{whole} from {self.host}{resuming}")
        done = offset
        step = self.progress_pct
        next_pct = (done * 100 // total // step + 1) * step if total else 100
        began = window_at = time.monotonic()
        window_bytes = 0
        try:
            out = path.open("ab" if offset else "wb")
        except OSError as exc:
            raise FetchError(f"cannot write {path}: {exc.strerror}") from None
        with out:
            while True:
                if self.stop.is_set():
                    raise _Stopped
                try:
                    # read1: returns what one read brings, so a trickle
                    # cannot hold a call open while it fills a whole chunk.
                    chunk = resp.read1(CHUNK)
                except (OSError, http.client.HTTPException) as exc:
                    raise _Transient(f"the transfer broke at {_size(done)}{of} ({exc!r})") from None
                if not chunk:
                    break
                try:
                    out.write(chunk)
                except OSError as exc:
                    raise FetchError(f"cannot write {path}: {exc.strerror}") from None
                done += len(chunk)
                window_bytes += len(chunk)
                with self._count:
                    self.received += len(chunk)
                now = time.monotonic()
                if now - window_at >= self.timeout_s:
                    if window_bytes < self.min_rate * (now - window_at):
                        rate = _size(window_bytes / (now - window_at))
                        raise _Transient(f"{rate}/s, under {_size(self.min_rate)}/s")
                    window_at, window_bytes = now, 0
                if total and done * 100 // total >= next_pct and done < total:
                    rate = _size((done - offset) / max(now - began, 1e-3))
                    pct = done * 100 // total
                    self.log(f"{f.name}: {pct} % ({_size(done)}{of}, {rate}/s)")
                    next_pct = (pct // step + 1) * step
        if total is not None and done < total:
            raise _Transient(f"the connection closed at {_size(done)}{of}")


def fetch(
    param_dir: str | os.PathLike[str],
    parameters_json: bytes | str,
    srs_json: bytes | str,
    sector_size: int,
    gateway: str = DEFAULT_GATEWAY,
    *,
    attempts: int = ATTEMPTS,
    retries: int = RETRIES,
    timeout_s: float = TIMEOUT_S,
    min_rate: int = MIN_RATE,
    retry_wait_s: float = RETRY_WAIT_S,
    progress_pct: int = PROGRESS_PCT,
    workers: int = WORKERS,
    lock_retry_s: float = LOCK_RETRY_S,
    lock_wait_s: float = LOCK_WAIT_S,
    log: Callable[[str], None] = say,
) -> FetchReport:
    """Make `param_dir` hold, verified, every file Curio fetches for
    `sector_size` (bytes) from the two lists (JSON text as curio
    ``GetParams`` takes it), from `gateway` (URL prefix of a CID).

    Returns what was found and fetched; FetchError (one line) when a list is
    malformed, the directory cannot be written, or a file cannot be had."""
    directory = Path(param_dir)
    files = plan(parameters_json, srs_json, sector_size)
    try:
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
    except OSError as exc:
        raise FetchError(f"cannot make {directory}: {exc.strerror}") from None
    fetcher = _Fetcher(
        directory,
        gateway,
        attempts=attempts,
        retries=retries,
        timeout_s=timeout_s,
        min_rate=min_rate,
        retry_wait_s=retry_wait_s,
        progress_pct=progress_pct,
        workers=workers,
        log=log,
    )
    report = FetchReport()
    log(f"checking {len(files)} files for {_size(sector_size)} sectors in {directory}")
    missing = fetcher.check_all(files, report)
    if missing:
        with _locked(directory, lock_retry_s, lock_wait_s, log) as waited:
            if waited:  # the holder may have fetched them meanwhile
                missing = fetcher.check_all(missing, report)
            log(
                f"{len(report.present)} files verified, {len(missing)} to fetch from {fetcher.host}"
            )
            fetcher.fetch_all(missing, report)
    report.received = fetcher.received
    log(
        f"all {len(files)} files verified ({len(report.fetched)} fetched, "
        f"{_size(report.received)} received)"
    )
    return report
