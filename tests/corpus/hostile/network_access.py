"""Attack: open network connections (exfiltrate inputs, fetch answers); reports what happened."""
import socket


def _reach():
    results = []
    for host, port in (("127.0.0.1", 22), ("1.1.1.1", 80), ("10.0.2.2", 80)):
        try:
            socket.create_connection((host, port), timeout=2).close()
            results.append(f"{host}:connected")
        except OSError as exc:
            results.append(f"{host}:{type(exc).__name__}:{exc.errno}")
    raise RuntimeError("NETWORK " + " ".join(results))


def softmax_naive(x, dim=-1):
    _reach()


def softmax_stable(x, dim=-1):
    _reach()
