"""A thin client for one Toxiproxy server's HTTP API.

Why not toxiproxy-python: it keeps the API address in class-level state
(one server per interpreter), while every cluster here runs its own server on
a free port, and it predates the ``reset_peer`` toxic. The API is small and
stable (https://github.com/Shopify/toxiproxy#http-api), so this wraps
``requests`` directly.

Semantics relied on (Toxiproxy README):
* ``enabled: false`` closes open connections and refuses new ones (link down);
* a ``timeout`` toxic with ``timeout: 0`` holds data forever without closing
  (black hole: the peer's session timeout fires);
* toxics apply to connections already open, per direction (``stream``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import requests

from chaos.errors import InfrastructureError


class ToxicType(StrEnum):
    LATENCY = "latency"
    BANDWIDTH = "bandwidth"
    SLOW_CLOSE = "slow_close"
    TIMEOUT = "timeout"
    RESET_PEER = "reset_peer"
    SLICER = "slicer"
    LIMIT_DATA = "limit_data"
    #: the project's own (toxiproxy/kafkatoxic): one Kafka API's requests or answers acted on
    KAFKA = "kafka"


class Stream(StrEnum):
    UPSTREAM = "upstream"      # client -> server
    DOWNSTREAM = "downstream"  # server -> client


@dataclass(frozen=True, slots=True)
class Toxic:
    """One toxic; ``attributes`` as in Toxiproxy's docs (e.g. latency, jitter in ms)."""

    name: str
    type: ToxicType
    stream: Stream = Stream.DOWNSTREAM
    toxicity: float = 1.0
    attributes: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "type": str(self.type), "stream": str(self.stream),
                "toxicity": self.toxicity, "attributes": dict(self.attributes)}


@dataclass(frozen=True, slots=True)
class ProxySpec:
    name: str
    listen: str
    upstream: str


class ToxiproxyClient:
    """HTTP client bound to one server (``http://127.0.0.1:<port>``)."""

    def __init__(self, host: str, port: int, timeout: float = 5.0):
        self.base = f"http://{host}:{port}"
        self.timeout = timeout
        self._http = requests.Session()
        self._http.trust_env = False  # never route loopback API calls through a proxy from the env

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        try:
            resp = self._http.request(method, self.base + path, json=body, timeout=self.timeout)
        except requests.RequestException as exc:
            raise InfrastructureError(f"Toxiproxy API {self.base} unreachable ({type(exc).__name__}): "
                                      "is the cluster up?") from exc
        if resp.status_code >= 400:
            raise InfrastructureError(f"Toxiproxy {method} {path} failed: HTTP {resp.status_code} {resp.text.strip()[:200]}")
        return resp.json() if resp.content else None

    def ping(self) -> bool:
        try:
            return self._http.get(self.base + "/version", timeout=1.0).ok
        except requests.RequestException:
            return False

    def version(self) -> str:
        return str(self._call("GET", "/version"))

    def populate(self, proxies: list[ProxySpec]) -> None:
        """Create (or replace) many proxies in one call."""
        self._call("POST", "/populate",
                   [{"name": p.name, "listen": p.listen, "upstream": p.upstream, "enabled": True} for p in proxies])

    def proxies(self) -> dict[str, Any]:
        return self._call("GET", "/proxies")

    def proxy(self, name: str) -> dict[str, Any]:
        return self._call("GET", f"/proxies/{name}")

    def set_enabled(self, name: str, enabled: bool) -> None:
        self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(self, proxy: str, toxic: Toxic) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics", toxic.to_json())

    def remove_toxic(self, proxy: str, toxic_name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{toxic_name}")

    def toxics(self, proxy: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/proxies/{proxy}/toxics")

    def reset(self) -> None:
        """Enable every proxy and remove every toxic."""
        self._call("POST", "/reset")
