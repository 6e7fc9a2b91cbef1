"""Which Dask cluster ``grader batch --dask`` grades on, and how the coordinator reaches it safely.

Dask's protocol unpickles the control messages it receives, and a scheduler or worker binds every
interface without authentication by default (dask/distributed issue #9283): whoever can connect can
run code there. So:

- ``local:N`` starts a :class:`distributed.LocalCluster` of N worker processes bound to 127.0.0.1
  only, with TLS and a throw-away certificate made for this run (``Security.temporary``): not even
  another user of this host can talk to it;
- ``tls://HOST:PORT`` connects with mutual TLS: a CA and a client certificate (and key) from
  ``--dask-tls-ca/--dask-tls-cert/--dask-tls-key`` or Dask's own ``distributed.comm.tls.*``
  configuration;
- ``tcp://HOST:PORT`` (or a bare ``HOST:PORT``) is accepted only when HOST is this host's loopback
  (``127.0.0.0/8``, ``::1``, ``localhost``); any other host is a usage error, without a connection
  attempt and without a name lookup (a name may point elsewhere tomorrow).

Parsing (:func:`parse`) needs no Dask; :class:`Session` imports it.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
from dataclasses import dataclass
from typing import Any

from grader.errors import UsageError

LOCAL = re.compile(r"local:(\d+)")
CONNECT_TIMEOUT_S = 30.0
CLOSE_TIMEOUT_S = 20.0
INSTALL = "pip install 'attention-grader[distributed]'"


@dataclass(frozen=True)
class Target:
    """A cluster to start (``address`` None: ``workers`` local processes) or to connect to."""

    address: str | None
    workers: int = 0
    tls_ca: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def label(self) -> str:
        return self.address or f"a local cluster of {self.workers} worker process(es)"


def parse(
    value: str,
    *,
    tls_ca: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
) -> Target:
    """The cluster ``--dask value`` names; a :class:`UsageError` saying why when it may not be
    used."""
    text = value.strip()
    match = LOCAL.fullmatch(text)
    files = [os.path.abspath(f) if f else None for f in (tls_ca, tls_cert, tls_key)]
    if match or text.startswith("local"):
        if not match or int(match[1]) < 1:
            raise UsageError(
                f"--dask {value!r}: give local:N with N >= 1 worker processes, or a scheduler address"
            )
        if any(files):
            raise UsageError(
                "--dask-tls-* are for a scheduler you started: local:N makes its own certificate"
            )
        return Target(None, int(match[1]))
    scheme, _, location = text.rpartition("://")
    scheme = scheme or "tcp"
    host = _host(location, value)
    if scheme == "tcp" and not is_loopback(host):
        raise UsageError(
            f"--dask {value!r}: refusing an unencrypted, unauthenticated tcp:// connection to {host}, "
            "which is not this host (Dask unpickles what it receives: anyone on that network could run "
            "code on the workers); start the cluster with TLS and give tls://HOST:PORT with "
            "--dask-tls-ca, --dask-tls-cert and --dask-tls-key"
        )
    if scheme == "tcp" and any(files):
        raise UsageError(
            f"--dask {value!r} is a tcp:// address: give tls://{location} to use the TLS files"
        )
    if scheme not in ("tcp", "tls"):
        raise UsageError(
            f"--dask {value!r}: the scheduler address must be tls://HOST:PORT (or tcp:// on this host)"
        )
    for name in filter(None, files):
        if not os.path.isfile(name):
            raise UsageError(f"{name}: no such file (a PEM file for --dask-tls-*)")
    return Target(f"{scheme}://{location}", 0, *files)


def _host(location: str, value: str) -> str:
    """The host part of ``HOST:PORT`` (``[v6]:PORT`` too)."""
    match = re.fullmatch(r"\[([^\]]+)\]:(\d+)|([^:/\[\]]+):(\d+)", location)
    if not match:
        raise UsageError(
            f"--dask {value!r}: give SCHEME://HOST:PORT (e.g. tls://grader-head:8786) or local:N"
        )
    return match[1] or match[3]


def is_loopback(host: str) -> bool:
    """``host`` is this machine's loopback, by its spelling alone (no name is looked up)."""
    if host.lower() in ("localhost", "localhost.localdomain", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def security(target: Target) -> Any:
    """The ``distributed.Security`` for a ``tls://`` target: the flags first, then Dask's
    configuration."""
    from distributed import Security

    given = {
        k: v
        for k, v in (
            ("tls_ca_file", target.tls_ca),
            ("tls_client_cert", target.tls_cert),
            ("tls_client_key", target.tls_key),
        )
        if v
    }
    sec = Security(require_encryption=True, **given)
    if not (
        getattr(sec, "tls_ca_file", None) and getattr(sec, "tls_client_cert", None)
    ):  # __slots__, set from config
        raise UsageError(
            f"--dask {target.address}: TLS needs a CA and a client certificate: give --dask-tls-ca and "
            "--dask-tls-cert (and --dask-tls-key unless the key is in the certificate file), or set "
            "Dask's distributed.comm.tls.ca-file and distributed.comm.tls.client.cert"
        )
    return sec


class Session:
    """A connected ``distributed.Client`` (and the local cluster it started, for ``local:N``)."""

    def __init__(self, target: Target) -> None:
        import dask
        from distributed import Client, LocalCluster, Security

        self.cluster: Any = None
        # each worker takes one task per thread, the rest wait at the scheduler: a class balances to
        # the last submission, and a worker that dies takes no queue of others' submissions with it
        with dask.config.set({"distributed.scheduler.worker-saturation": 1.0}):
            try:
                if target.address is None:
                    self.cluster = LocalCluster(
                        n_workers=target.workers,
                        threads_per_worker=1,
                        processes=True,
                        host="127.0.0.1",
                        dashboard_address=None,
                        memory_limit=0,
                        security=Security.temporary(),
                        silence_logs=logging.ERROR,
                    )
                    self.client = Client(self.cluster, timeout=CONNECT_TIMEOUT_S)
                else:
                    self.client = Client(
                        target.address, security=security(target), timeout=CONNECT_TIMEOUT_S
                    )
            except (OSError, TimeoutError) as exc:
                self.close()
                raise UsageError(
                    f"cannot reach the Dask scheduler of {target.label}: {exc}"
                ) from None
            except (
                ImportError
            ) as exc:  # Security.temporary() needs `cryptography`, part of the extra
                self.close()
                raise UsageError(f"--dask: {exc}; {INSTALL}") from None

    def close(self) -> None:
        for thing in (getattr(self, "client", None), self.cluster):
            if thing is not None:
                try:
                    thing.close(timeout=CLOSE_TIMEOUT_S)
                except Exception:  # noqa: BLE001 - closing is best effort: the scorecards are already written
                    pass
