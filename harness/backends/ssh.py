"""Control of one host over SSH, as Jepsen's control layer does it: commands, files, retries, a log.

One `SshSession` per host keeps one authenticated paramiko transport and opens a channel per
command (sshd's MaxSessions is raised in the image, so several threads can run commands at once).
The host key is pinned: the caller gives the key it read from the host by another path (the docker
backend reads it with `docker exec`), so nothing is trusted on first use.

Retries (tenacity) cover what is safe to repeat: connecting, and opening a channel on a transport
that died (the command never started). A command that started and then lost its connection is
not run again, since it may have had its effect: that is an `SshError` for the caller to judge.

Every command, its exit status and its duration go to the `CommandLog` (the run's backend.log).
"""

from __future__ import annotations

import contextlib
import io
import select
import shlex
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import paramiko
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

from contracts.backend import BackendError, CommandResult

T = TypeVar("T")

# Failures of the connection itself, as opposed to a command that ran and failed.
TRANSIENT = (OSError, EOFError, paramiko.SSHException)


class SshError(BackendError):
    """A host could not be reached or a command could not be run; the message names the host."""


class CommandFailed(BackendError):
    """A command ran and exited non-zero (raised only when the caller asked for `check`)."""

    def __init__(self, host: str, result: CommandResult) -> None:
        tail = (result.stderr.strip() or result.stdout.strip())[-800:]
        super().__init__(f"{host}: `{shlex.join(result.argv)}` exited {result.exit_status}"
                         + (f": {tail}" if tail else ""))
        self.result = result


class _ChannelUnavailable(Exception):
    """The transport could not open a channel: the command never started, so retry is safe."""


@dataclass(frozen=True)
class KeyPair:
    private: paramiko.PKey
    public_line: str  # "ssh-ed25519 AAAA... comment", for authorized_keys
    private_pem: str  # OpenSSH format, for `ssh -i` by a human while the run lives


def generate_key(comment: str) -> KeyPair:
    """A fresh ed25519 key pair (paramiko cannot make ed25519 keys itself)."""
    key = ed25519.Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                            serialization.NoEncryption()).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH).decode()
    return KeyPair(paramiko.Ed25519Key.from_private_key(io.StringIO(pem)),
                   f"{public} {comment}", pem)


class CommandLog:
    """Appends timestamped lines to one file; shared by the sessions of a run."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._lock = threading.Lock()

    def write(self, message: str) -> None:
        if self._path is None:
            return
        stamp = time.strftime("%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}"
        with self._lock, contextlib.suppress(OSError), open(self._path, "a") as out:
            out.write(f"{stamp} {message}\n")


class SshSession:
    def __init__(self, name: str, host: str, key: paramiko.PKey, host_key: paramiko.PKey,
                 log: CommandLog, port: int = 22, user: str = "root",
                 connect_timeout: float = 30.0) -> None:
        self.name = name
        self.host = host
        self.port = port
        self._user = user
        self._key = key
        self._host_key = host_key
        self._log = log
        self._connect_timeout = connect_timeout
        self._client: paramiko.SSHClient | None = None
        self._sftp: paramiko.SFTPClient | None = None
        self._lock = threading.RLock()  # guards _client and _sftp, not the commands

    # -- connection ----------------------------------------------------------------------------

    def connect(self) -> None:
        with self._lock:
            if self._transport_alive():
                return
            self._close_quietly()
            try:
                self._client = self._connect_retrying()
            except TRANSIENT as exc:
                raise SshError(f"{self.name}: cannot log in to root@{self.host}:{self.port} "
                               f"within {self._connect_timeout:.0f}s: {exc}") from exc
            self._log.write(f"{self.name}: connected to {self.host}:{self.port}")

    def _connect_retrying(self) -> paramiko.SSHClient:
        @retry(retry=retry_if_exception_type(TRANSIENT), reraise=True,
               stop=stop_after_delay(self._connect_timeout),
               wait=wait_exponential(multiplier=0.05, max=1.0))
        def attempt() -> paramiko.SSHClient:
            client = paramiko.SSHClient()
            client.get_host_keys().add(self._known_hosts_name(), self._host_key.get_name(),
                                       self._host_key)
            client.set_missing_host_key_policy(paramiko.RejectPolicy())
            try:
                client.connect(self.host, port=self.port, username=self._user, pkey=self._key,
                               timeout=5, banner_timeout=10, auth_timeout=10,
                               allow_agent=False, look_for_keys=False)
            except BaseException:
                client.close()
                raise
            transport = client.get_transport()
            if transport is not None:
                transport.set_keepalive(15)
            return client

        return attempt()

    def _known_hosts_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def _transport_alive(self) -> bool:
        transport = self._client.get_transport() if self._client else None
        return transport is not None and transport.is_active()

    def close(self) -> None:
        with self._lock:
            self._close_quietly()

    def _close_quietly(self) -> None:
        with contextlib.suppress(Exception):
            if self._sftp is not None:
                self._sftp.close()
        with contextlib.suppress(Exception):
            if self._client is not None:
                self._client.close()
        self._sftp = None
        self._client = None

    # -- commands ------------------------------------------------------------------------------

    def run(self, argv: Sequence[str], timeout: float = 60.0, check: bool = True,
            shell: str | None = None, stdin: bytes = b"", cwd: str | None = None
            ) -> CommandResult:
        """Run `argv` (quoted for the remote shell), or the shell text `shell` if given."""
        command = shell if shell is not None else shlex.join(argv)
        if cwd is not None:
            command = f"cd {shlex.quote(cwd)} && {command}"
        shown = tuple(argv) if shell is None else ("sh", "-c", shell)
        started = time.monotonic()
        self._log.write(f"{self.name} $ {command}")
        try:
            status, out, err = self._run_retrying(command, timeout, stdin)
        except SshError as exc:
            self._log.write(f"{self.name}   failed: {exc}")
            raise
        elapsed = (time.monotonic() - started) * 1000
        detail = f": {err.strip().splitlines()[-1][:300]}" if status and err.strip() else ""
        self._log.write(f"{self.name}   exit {status} ({elapsed:.0f} ms){detail}")
        result = CommandResult(shown, status, out, err)
        if check and status != 0:
            raise CommandFailed(self.name, result)
        return result

    def _run_retrying(self, command: str, timeout: float, stdin: bytes) -> tuple[int, str, str]:
        @retry(retry=retry_if_exception_type(_ChannelUnavailable), reraise=True,
               stop=stop_after_attempt(4), wait=wait_exponential(multiplier=0.1, max=2.0))
        def attempt() -> tuple[int, str, str]:
            channel = self._open_channel()
            try:
                return self._drive(channel, command, timeout, stdin)
            finally:
                channel.close()

        try:
            return attempt()
        except _ChannelUnavailable as exc:
            raise SshError(f"{self.name}: cannot open an SSH channel to {self.host}: "
                           f"{exc.__cause__ or exc}") from exc

    def _open_channel(self) -> paramiko.Channel:
        try:
            self.connect()
            with self._lock:
                assert self._client is not None
                transport = self._client.get_transport()
                if transport is None:
                    raise paramiko.SSHException("no transport")
                return transport.open_session(timeout=10)
        except (SshError, *TRANSIENT) as exc:
            with self._lock:
                self._close_quietly()  # reconnect on the next attempt
            raise _ChannelUnavailable(str(exc)) from exc

    def _drive(self, channel: paramiko.Channel, command: str, timeout: float,
               stdin: bytes) -> tuple[int, str, str]:
        deadline = time.monotonic() + timeout
        out, err = bytearray(), bytearray()
        try:
            channel.exec_command(command)
            if stdin:
                channel.sendall(stdin)
            channel.shutdown_write()
            while True:
                while channel.recv_ready():
                    out += channel.recv(65536)
                while channel.recv_stderr_ready():
                    err += channel.recv_stderr(65536)
                if channel.exit_status_ready() and (channel.eof_received or channel.closed) \
                        and not channel.recv_ready() and not channel.recv_stderr_ready():
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise SshError(f"{self.name}: `{command}` still ran after {timeout:.0f}s "
                                   f"(output so far: {bytes(out[-300:])!r})")
                # The channel's fd wakes on stdout data and on EOF; stderr is polled.
                select.select([channel], [], [], min(remaining, 0.05))
            status = channel.recv_exit_status()
        except (TimeoutError, *TRANSIENT) as exc:
            raise SshError(f"{self.name}: connection lost during `{command}`: {exc}") from exc
        return status, out.decode(errors="replace"), err.decode(errors="replace")

    # -- files ---------------------------------------------------------------------------------

    def _sftp_client(self) -> paramiko.SFTPClient:
        with self._lock:
            if self._sftp is None or not self._transport_alive():
                self.connect()
                assert self._client is not None
                self._sftp = self._client.open_sftp()
            return self._sftp

    def _with_sftp(self, what: str, action: Callable[[paramiko.SFTPClient], T]) -> T:
        """Run action(sftp), reconnecting once if the connection had died."""
        for attempt in (1, 2):
            try:
                return action(self._sftp_client())
            except (TimeoutError, EOFError, paramiko.SSHException, ConnectionError) as exc:
                if attempt == 2:
                    raise SshError(f"{self.name}: {what}: {exc}") from exc
                with self._lock:
                    self._close_quietly()
            except OSError as exc:
                raise SshError(f"{self.name}: {what}: {exc}") from exc
        raise AssertionError("unreachable")

    def write_file(self, path: str, content: bytes, mode: int = 0o644) -> None:
        self._log.write(f"{self.name} put {path} ({len(content)} bytes)")

        def put(sftp: paramiko.SFTPClient) -> None:
            _makedirs(sftp, str(Path(path).parent))
            with sftp.open(path, "wb") as remote:
                remote.set_pipelined(True)
                remote.write(content)
            sftp.chmod(path, mode)

        self._with_sftp(f"cannot write {path}", put)

    def read_file(self, path: str) -> bytes:
        def get(sftp: paramiko.SFTPClient) -> bytes:
            with sftp.open(path, "rb") as remote:
                remote.prefetch()
                return bytes(remote.read())

        return self._with_sftp(f"cannot read {path}", get)

    def fetch(self, remote_path: str, local_dir: Path) -> list[str]:
        """Copy a file or tree into local_dir/<its name>; returns the files copied (none when
        the path does not exist: a node that never started has no logs, which is no error)."""
        copied: list[str] = []

        def get(sftp: paramiko.SFTPClient) -> None:
            try:
                attrs = sftp.stat(remote_path)
            except FileNotFoundError:
                return
            name = Path(remote_path.rstrip("/")).name or "root"
            _fetch_entry(sftp, remote_path, attrs, local_dir / name, copied)

        local_dir.mkdir(parents=True, exist_ok=True)
        self._with_sftp(f"cannot fetch {remote_path}", get)
        self._log.write(f"{self.name} fetched {remote_path}: {len(copied)} files")
        return copied


def _makedirs(sftp: paramiko.SFTPClient, path: str) -> None:
    if path in ("", "/", "."):
        return
    try:
        sftp.stat(path)
        return
    except FileNotFoundError:
        pass
    _makedirs(sftp, str(Path(path).parent))
    with contextlib.suppress(OSError):  # made meanwhile by another writer
        sftp.mkdir(path)


def _fetch_entry(sftp: paramiko.SFTPClient, remote: str, attrs: paramiko.SFTPAttributes,
                 local: Path, copied: list[str]) -> None:
    mode = attrs.st_mode or 0
    if stat.S_ISDIR(mode):
        local.mkdir(parents=True, exist_ok=True)
        for entry in sftp.listdir_attr(remote):
            _fetch_entry(sftp, f"{remote.rstrip('/')}/{entry.filename}", entry,
                         local / entry.filename, copied)
    elif stat.S_ISREG(mode):
        local.parent.mkdir(parents=True, exist_ok=True)
        try:
            sftp.get(remote, str(local))
        except FileNotFoundError:
            return  # removed while we walked (a log rotated, a segment deleted)
        copied.append(remote)
    # sockets, fifos, devices and dangling links are not results: skipped
