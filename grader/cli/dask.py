"""CLI for grading a class on a Dask cluster: ``grader batch … --dask ADDRESS|local:N`` (a thin
shell).

This module imports no Dask: ``grader batch`` registers its options on every run, and only a run
with ``--dask`` loads :mod:`grader.cluster.grading` (and Dask with it). Exit codes as ``grader
batch``: 0 done, 1 some submission ended in an error, 2 usage error (an address that is not allowed,
a worker refused by its self-check), 3 a worker's canary failed, 130 interrupted.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import os
from pathlib import Path

from grader.batch.results import Options
from grader.errors import UsageError

TLS_FLAGS = ("dask_tls_ca", "dask_tls_cert", "dask_tls_key")


def add_options(p: argparse.ArgumentParser) -> None:
    """``--dask``, ``--dask-tls-*`` and ``--dask-gpu`` on ``grader batch``."""
    p.add_argument(
        "--dask",
        metavar="ADDRESS|local:N",
        help="grade on a Dask cluster, one task per submission: the scheduler's tls://HOST:PORT (tcp:// only "
        "on this host), or local:N for N worker processes here; needs the [distributed] extra",
    )
    p.add_argument(
        "--dask-tls-ca",
        metavar="PEM",
        help="CA certificate the scheduler's and workers' certificates "
        "are signed by (default: Dask's distributed.comm.tls.ca-file)",
    )
    p.add_argument(
        "--dask-tls-cert",
        metavar="PEM",
        help="this client's certificate (default: Dask's distributed.comm.tls.client.cert)",
    )
    p.add_argument(
        "--dask-tls-key",
        metavar="PEM",
        help="this client's private key, unless it is in --dask-tls-cert",
    )
    p.add_argument(
        "--dask-gpu",
        action="store_true",
        help="send every submission to a worker started with "
        "--resources GPU=1 (the CUDA tests run there; summary.json lists who was graded with CUDA)",
    )


def dask_only(args: argparse.Namespace) -> bool:
    """A ``--dask-*`` option was given (without ``--dask``, a usage error)."""
    return bool(args.dask_gpu or any(getattr(args, f) for f in TLS_FLAGS))


def batch_dask(args: argparse.Namespace, options: Options) -> int:
    """``grader batch --dask``: this process coordinates, the cluster's workers grade."""
    from grader.batch import engine, job
    from grader.batch.progress import Progress
    from grader.cli import common as cli
    from grader.cluster import connect as dask_connect

    _refuse_conflicts(args, options)
    target = dask_connect.parse(
        args.dask, tls_ca=args.dask_tls_ca, tls_cert=args.dask_tls_cert, tls_key=args.dask_tls_key
    )
    if importlib.util.find_spec("distributed") is None:
        raise UsageError(f"--dask needs Dask's distributed package: {dask_connect.INSTALL}")
    if target.address is not None and target.address.startswith("tls://"):
        dask_connect.security(target)  # a usage error now, not once the command has moved to /
    submissions, out = os.path.abspath(args.submissions), os.path.abspath(args.out)
    options = _absolute(options)
    roster = cli.roster_of(args.roster)
    cli.warn_exports(args.export or (), roster)
    # local worker processes are spawned with `python -c`, which puts their working folder first on
    # sys.path: never the class folder (a student's planted module), so they start, and we run, in /
    os.chdir("/")
    from grader.cluster.grading import DaskGrading

    grading = functools.partial(DaskGrading, target=target, gpu=args.dask_gpu)
    try:
        outcome = job.batch(
            submissions,
            out=out,
            options=options,
            export=tuple(args.export or ()),
            progress=Progress(rich=False if args.quiet else None),
            roster=roster,
            grading=grading,
            similarity=args.similarity,
        )
    except engine.BatchInterrupted as exc:
        return cli.interrupted(exc, out)
    return cli.finished(outcome)


def _refuse_conflicts(args: argparse.Namespace, options: Options) -> None:
    if args.dask is None:
        raise UsageError("--dask-tls-* and --dask-gpu go with --dask ADDRESS|local:N")
    if args.shard is not None or args.shards is not None:
        raise UsageError("--dask and --shard are two ways to use many machines: give one of them")
    if args.jobs is not None:
        raise UsageError(
            "-j sets this machine's slots; with --dask every Dask worker thread grades (local:N: N workers)"
        )
    if options.isolation not in ("auto", "namespace"):
        raise UsageError(
            f"--isolation {options.isolation}: a Dask cluster grades only under the namespace sandbox"
        )


def _absolute(options: Options) -> Options:
    """``options`` with its manifest path absolute (the command moves to /)."""
    import dataclasses

    path = options.manifest_path
    return dataclasses.replace(options, manifest_path=Path(os.path.abspath(path)) if path else None)
