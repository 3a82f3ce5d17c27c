"""httpx transports over httpcore pools that use a network backend of our choosing.

httpx has no public way to choose httpcore's network backend, and httpcore's pools take one
publicly (`network_backend=`). `PoolTransport` is the small adapter between the two public APIs
(what httpx.HTTPTransport does, minus the options the agent never sets). Since httpx builds its
proxy transports itself only when it builds the direct one too, `proxy_mounts` builds them from
the environment (HTTP_PROXY / HTTPS_PROXY / ALL_PROXY / NO_PROXY) the way httpx does.
"""

from __future__ import annotations

import ipaddress
import ssl
import urllib.request
from collections.abc import Iterable, Iterator

import httpcore
import httpx

# httpx's default limits (httpx.Client and httpx.HTTPTransport use the same).
LIMITS = httpx.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)

# Most specific first: an httpcore.ReadTimeout becomes an httpx.ReadTimeout, not the base class.
_ERRORS: list[tuple[type[Exception], type[httpx.TransportError]]] = [
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
]


def _as_httpx(exc: Exception) -> Exception:
    for theirs, ours in _ERRORS:
        if isinstance(exc, theirs):
            return ours(str(exc))
    return exc


class _Body(httpx.SyncByteStream):
    def __init__(self, stream: Iterable[bytes]) -> None:
        self._stream = stream

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._stream
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def close(self) -> None:
        close = getattr(self._stream, "close", None)
        if close is not None:
            close()


class PoolTransport(httpx.BaseTransport):
    """An httpx transport that sends through one httpcore pool (direct or proxy)."""

    def __init__(self, pool: httpcore.ConnectionInterface) -> None:
        self.pool = pool

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.SyncByteStream)
        core = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=request.url.raw_scheme,
                host=request.url.raw_host,
                port=request.url.port,
                target=request.url.raw_path,
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        try:
            answer = self.pool.handle_request(core)
        except Exception as exc:
            mapped = _as_httpx(exc)
            if mapped is exc:
                raise
            raise mapped from exc
        assert isinstance(answer.stream, Iterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream),
            extensions=answer.extensions,
        )

    def close(self) -> None:
        self.pool.close()


def pool(
    ssl_context: ssl.SSLContext,
    backend: httpcore.NetworkBackend,
    proxy: str | None = None,
) -> httpcore.ConnectionInterface:
    """A connection pool, direct or through `proxy` (http, https, socks5 or socks5h URL)."""
    common = {
        "ssl_context": ssl_context,
        "max_connections": LIMITS.max_connections,
        "max_keepalive_connections": LIMITS.max_keepalive_connections,
        "keepalive_expiry": LIMITS.keepalive_expiry,
        "network_backend": backend,
    }
    if proxy is None:
        return httpcore.ConnectionPool(**common)
    spec = httpx.Proxy(proxy)
    url = httpcore.URL(
        scheme=spec.url.raw_scheme,
        host=spec.url.raw_host,
        port=spec.url.port,
        target=spec.url.raw_path,
    )
    if spec.url.scheme in ("http", "https"):
        return httpcore.HTTPProxy(
            proxy_url=url,
            proxy_auth=spec.raw_auth,
            proxy_headers=spec.headers.raw,
            proxy_ssl_context=spec.ssl_context,
            **common,
        )
    if spec.url.scheme in ("socks5", "socks5h"):
        return httpcore.SOCKSProxy(proxy_url=url, proxy_auth=spec.raw_auth, **common)
    raise ValueError(
        "Proxy protocol must be either 'http', 'https', 'socks5', or 'socks5h',"
        f" but got {spec.url.scheme!r}."
    )


def environment_proxies() -> dict[str, str | None]:
    """Mount pattern → proxy URL (None: go direct), from the environment as httpx reads it."""
    info = urllib.request.getproxies()
    mounts: dict[str, str | None] = {}
    for scheme in ("http", "https", "all"):
        if info.get(scheme):
            host = info[scheme]
            mounts[f"{scheme}://"] = host if "://" in host else f"http://{host}"
    for host in (h.strip() for h in info.get("no", "").split(",")):
        # curl's NO_PROXY rules (CURLOPT_NOPROXY), as httpx applies them.
        if host == "*":
            return {}
        if not host:
            continue
        if "://" in host:
            mounts[host] = None
        elif _is_ip(host, ipaddress.IPv4Address):
            mounts[f"all://{host}"] = None
        elif _is_ip(host, ipaddress.IPv6Address):
            mounts[f"all://[{host}]"] = None
        elif host.lower() == "localhost":
            mounts[f"all://{host}"] = None
        else:
            mounts[f"all://*{host}"] = None
    return mounts


def _is_ip(host: str, kind: type) -> bool:
    try:
        kind(host.split("/")[0])
    except ValueError:
        return False
    return True


def proxy_mounts(
    ssl_context: ssl.SSLContext, backend: httpcore.NetworkBackend
) -> dict[str, httpx.BaseTransport | None]:
    """httpx.Client `mounts` for the environment's proxies, all on `backend`."""
    return {
        pattern: None if url is None else PoolTransport(pool(ssl_context, backend, url))
        for pattern, url in environment_proxies().items()
    }
